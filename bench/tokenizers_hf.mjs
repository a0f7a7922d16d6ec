// bench/tokenizers.sh's reference for Hugging Face tokenizer.json files: npm
// @huggingface/tokenizers (Hugging Face's JavaScript port of its library) encoding a file
// (argv[3]) with the tokenizer.json and tokenizer_config.json in the folder argv[2], as
// `encode(text, {add_special_tokens: false})`, one thread. The text goes in pieces cut
// after a newline before an ASCII letter, about 64 KB each (where Shardwise may cut a
// document too), as a user encodes documents, not one 30 MB string. Prints the ids' count.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(new URL('../tests/tokenizers/package.json', import.meta.url));
const { Tokenizer } = require('@huggingface/tokenizers');
const [folder, path] = process.argv.slice(2);
const tokenizer = new Tokenizer(
  JSON.parse(readFileSync(`${folder}/tokenizer.json`, 'utf8')),
  JSON.parse(readFileSync(`${folder}/tokenizer_config.json`, 'utf8')),
);
const text = readFileSync(path, 'utf8');
let ids = 0;
for (let start = 0; start < text.length;) {
  let end = Math.min(text.length, start + 65536);
  while (end < text.length && !(text[end - 1] === '\n' && /[A-Za-z]/.test(text[end]))) end++;
  ids += tokenizer.encode(text.slice(start, end), { add_special_tokens: false }).ids.length;
  start = end;
}
process.stdout.write(`${ids}\n`);
