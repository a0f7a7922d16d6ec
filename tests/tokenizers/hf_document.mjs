// What transformers makes of documents with the files Shardwise exports beside a model
// (output.huggingface_dir: tokenizer.json and tokenizer_config.json, argv[2] a folder),
// through @huggingface/tokenizers: line 1, the ids of each text file argv[3...] with the
// post-processor's special tokens (`encode(text)`, add_special_tokens left on, as
// transformers encodes), one file after another; line 2, the ids of tokenizer_config.json's
// bos_token and eos_token ("-" where it names none).
import { readFileSync } from 'node:fs';
import { Tokenizer } from '@huggingface/tokenizers';

const [folder, ...texts] = process.argv.slice(2);
const config = JSON.parse(readFileSync(`${folder}/tokenizer_config.json`, 'utf8'));
const tokenizer = new Tokenizer(
  JSON.parse(readFileSync(`${folder}/tokenizer.json`, 'utf8')), config);
const ids = texts.flatMap((path) => tokenizer.encode(readFileSync(path, 'utf8')).ids);
process.stdout.write(ids.join(' ') + '\n');
const idOf = (token) => {
  const text = typeof token === 'object' && token !== null ? token.content : token;
  if (typeof text !== 'string') return '-';
  return String(tokenizer.token_to_id(text) ?? 'none');
};
process.stdout.write(`${idOf(config.bos_token)} ${idOf(config.eos_token)}\n`);
