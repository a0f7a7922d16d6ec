// Hugging Face's own ids for each text of a JSON array, with a tokenizer.json and its
// tokenizer_config.json (argv[2], a folder): @huggingface/tokenizers, the JavaScript port
// of the library's encoding. Writes a line of ids per text to stdout, and to argv[4] the
// texts whose ids decode back to them there (the round trip Shardwise must keep too).
// Encoded as `Tokenizer.encode(text, {add_special_tokens: false})`: added and special
// tokens' text in the text is matched, no post-processor ids are added.
import { readFileSync, writeFileSync } from 'node:fs';
import { Tokenizer } from '@huggingface/tokenizers';

const [folder, textsPath, roundTripPath] = process.argv.slice(2);
const tokenizer = new Tokenizer(
  JSON.parse(readFileSync(`${folder}/tokenizer.json`, 'utf8')),
  JSON.parse(readFileSync(`${folder}/tokenizer_config.json`, 'utf8')),
);
const texts = JSON.parse(readFileSync(textsPath, 'utf8'));
const roundTrip = [];
for (const text of texts) {
  const ids = tokenizer.encode(text, { add_special_tokens: false }).ids;
  process.stdout.write(ids.join(' ') + '\n');
  if (tokenizer.decode(ids) === text) roundTrip.push(text);
}
writeFileSync(roundTripPath, JSON.stringify(roundTrip));
