// Writes the vocabulary of a llama.cpp vocab-only GGUF file as the files `shardwise
// tokenize` loads, so llama.cpp's tokenizer test vectors (ggml-vocab-NAME.gguf.inp/.out,
// produced by Hugging Face's tokenizers) check Shardwise's encoders:
//   tokenizer.ggml.model "llama" (SentencePiece): OUT/tokenizer.model, a SentencePiece
//     ModelProto with the file's pieces, scores and types, and Llama 2's encoding settings
//     (BPE, byte fallback, a dummy prefix, whitespace kept as it is);
//   "gpt2" with pre "gpt-2": OUT/encoder.json + OUT/vocab.bpe (GPT-2's own files' form);
//   "gpt2" with pre "llama-bpe": OUT/llama3.tiktoken (Llama 3's tokenizer.model form: each
//     ordinary token's bytes in base64 and its rank, which is its id).
// Usage: node gguf_vocab.mjs FILE.gguf OUT_DIR   (prints the flags for `shardwise tokenize`)
import fs from 'node:fs';
import path from 'node:path';

// GGUF (llama.cpp's docs/gguf.md): "GGUF", version, tensor count, key-value count, then
// each key (u64 length + UTF-8) with a u32 value type and its value, little-endian.
function readGgufMetadata(file) {
  const b = fs.readFileSync(file);
  let at = 0;
  const take = (n, read) => { const v = read(at); at += n; return v; };
  const u32 = () => take(4, (o) => b.readUInt32LE(o));
  const u64 = () => take(8, (o) => Number(b.readBigUInt64LE(o)));
  const str = () => { const n = u64(); return take(n, (o) => b.toString('utf8', o, o + n)); };
  const scalars = {
    0: () => take(1, (o) => b.readUInt8(o)), 1: () => take(1, (o) => b.readInt8(o)),
    2: () => take(2, (o) => b.readUInt16LE(o)), 3: () => take(2, (o) => b.readInt16LE(o)),
    4: u32, 5: () => take(4, (o) => b.readInt32LE(o)), 6: () => take(4, (o) => b.readFloatLE(o)),
    7: () => take(1, (o) => b.readUInt8(o) !== 0), 8: str, 10: u64,
    11: () => take(8, (o) => Number(b.readBigInt64LE(o))), 12: () => take(8, (o) => b.readDoubleLE(o)),
  };
  const value = (type) => {
    if (type === 9) {
      const elementType = u32();
      return Array.from({ length: u64() }, () => value(elementType));
    }
    if (!scalars[type]) throw new Error(`${file}: GGUF value type ${type} is unknown`);
    return scalars[type]();
  };
  if (b.toString('latin1', 0, 4) !== 'GGUF') throw new Error(`${file}: not a GGUF file`);
  at = 4;
  const meta = { version: u32() };
  u64();
  const count = u64();
  for (let i = 0; i < count; i++) { const key = str(); meta[key] = value(u32()); }
  return meta;
}

// Protobuf's wire format, as much as a SentencePiece ModelProto needs.
function varint(n) {
  const out = [];
  let v = BigInt.asUintN(64, BigInt(n));
  do { let byte = Number(v & 0x7fn); v >>= 7n; if (v) byte |= 0x80; out.push(byte); } while (v);
  return Buffer.from(out);
}
const tag = (field, wire) => varint((field << 3) | wire);
const varintField = (field, n) => Buffer.concat([tag(field, 0), varint(n)]);
const bytesField = (field, bytes) => Buffer.concat([tag(field, 2), varint(bytes.length), bytes]);
const floatField = (field, x) => { const f = Buffer.alloc(4); f.writeFloatLE(x); return Buffer.concat([tag(field, 5), f]); };

function sentencePieceModel(meta) {
  const tokens = meta['tokenizer.ggml.tokens'];
  const scores = meta['tokenizer.ggml.scores'];
  const types = meta['tokenizer.ggml.token_type'];  // SentencePiece's own type numbers
  const pieces = tokens.map((piece, id) => bytesField(1, Buffer.concat([
    bytesField(1, Buffer.from(piece, 'utf8')), floatField(2, scores[id]), varintField(3, types[id])])));
  const trainer = Buffer.concat([
    varintField(3, 2),  // model_type: BPE
    varintField(4, tokens.length),
    varintField(35, types.includes(6) ? 1 : 0),  // byte_fallback
    varintField(40, meta['tokenizer.ggml.unknown_token_id']),
    varintField(41, meta['tokenizer.ggml.bos_token_id']),
    varintField(42, meta['tokenizer.ggml.eos_token_id']),
    varintField(43, -1),  // pad_id: none
  ]);
  const normalizer = Buffer.concat([
    bytesField(1, Buffer.from('identity')),
    varintField(3, 1),  // add_dummy_prefix
    varintField(4, 0),  // remove_extra_whitespaces: no
    varintField(5, 1),  // escape_whitespaces: ' ' -> U+2581
  ]);
  return Buffer.concat([...pieces, bytesField(2, trainer), bytesField(3, normalizer)]);
}

// GPT-2's map from bytes to the printable characters its vocabulary files spell them with.
function unicodeToByte() {
  const printable = [];
  for (const [lo, hi] of [[33, 126], [161, 172], [174, 255]]) for (let b = lo; b <= hi; b++) printable.push(b);
  const map = new Map();
  let next = 0;
  for (let b = 0; b < 256; b++) {
    map.set(String.fromCodePoint(printable.includes(b) ? b : 256 + next++), b);
  }
  return map;
}

function tokenBytes(token, map) {
  return Buffer.from(Array.from(token, (ch) => {
    if (!map.has(ch)) throw new Error(`token ${JSON.stringify(token)} is not byte-level`);
    return map.get(ch);
  }));
}

const [file, out] = process.argv.slice(2);
if (!file || !out) { console.error('usage: node gguf_vocab.mjs FILE.gguf OUT_DIR'); process.exit(2); }
const meta = readGgufMetadata(file);
const model = meta['tokenizer.ggml.model'];
const pre = meta['tokenizer.ggml.pre'];
fs.mkdirSync(out, { recursive: true });
if (model === 'llama') {
  fs.writeFileSync(path.join(out, 'tokenizer.model'), sentencePieceModel(meta));
  console.log(`--tokenizer=sentencepiece --sentencepiece_model=${path.join(out, 'tokenizer.model')}`);
} else if (model === 'gpt2' && pre === 'gpt-2') {
  const encoder = Object.fromEntries(meta['tokenizer.ggml.tokens'].map((t, id) => [t, id]));
  fs.writeFileSync(path.join(out, 'encoder.json'), JSON.stringify(encoder));
  fs.writeFileSync(path.join(out, 'vocab.bpe'), ['#version: 0.2', ...meta['tokenizer.ggml.merges'], ''].join('\n'));
  console.log(`--tokenizer=gpt2 --encoder_json=${path.join(out, 'encoder.json')} --vocab_bpe=${path.join(out, 'vocab.bpe')}`);
} else if (model === 'gpt2' && pre === 'llama-bpe') {
  const map = unicodeToByte();
  const types = meta['tokenizer.ggml.token_type'];
  const lines = meta['tokenizer.ggml.tokens'].flatMap((t, id) =>
    types[id] === 1 ? [`${tokenBytes(t, map).toString('base64')} ${id}`] : []);
  fs.writeFileSync(path.join(out, 'llama3.tiktoken'), lines.join('\n') + '\n');
  console.log(`--tokenizer=tiktoken --encoding=llama3 --tiktoken=${path.join(out, 'llama3.tiktoken')}`);
} else {
  console.error(`${file}: tokenizer ${model} with pre-tokenizer ${pre} is not one Shardwise loads`);
  process.exit(1);
}
