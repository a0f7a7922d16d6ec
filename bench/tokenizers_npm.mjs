// bench/tokenizers.sh's reference: npm gpt-tokenizer encoding a whole file (argv[3]) with
// the encoding argv[2], in memory; prints the number of ids.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(new URL('../tests/tokenizers/package.json', import.meta.url));
const [encodingName, path] = process.argv.slice(2);
const { encode } = require(`gpt-tokenizer/cjs/encoding/${encodingName}`);
const text = readFileSync(path, 'utf8');
process.stdout.write(`${encode(text, { disallowedSpecial: new Set() }).length}\n`);
