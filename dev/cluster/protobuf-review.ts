/**
 * Reading the self reviews kubectl sends as protobuf (`Content-Type:
 * application/vnd.kubernetes.protobuf`; kubectl 1.33's `auth can-i` does): the `k8s\0` envelope
 * (runtime.Unknown: typeMeta, raw) around a SelfSubjectAccessReview, SelfSubjectRulesReview or SelfSubjectReview
 * (`k8s.io/api/authorization/v1/generated.proto`), turned into the JSON object the JSON path
 * receives. Only the fields the reviews use are read; the answer goes back as JSON (kubectl
 * accepts `application/json` too). Pure: bytes in, object or error out.
 */

type Json = Record<string, unknown>;

/** The media type of Kubernetes protobuf bodies. */
export const PROTOBUF_MEDIA_TYPE = 'application/vnd.kubernetes.protobuf';
const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]); // "k8s\0"

/** One field of a protobuf message: number, wire type and value (varint or bytes). */
interface Field {
  no: number;
  wire: number;
  varint?: bigint;
  bytes?: Buffer;
}

/** Split a protobuf message into its fields; throws on truncated or unsupported input. */
export function protobufFields(buf: Buffer): Field[] {
  const fields: Field[] = [];
  let i = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (i >= buf.length) throw new Error('truncated varint');
      const b = buf[i++]!;
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
      if (shift > 63n) throw new Error('varint too long');
    }
  };
  while (i < buf.length) {
    const key = varint();
    const no = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (wire === 0) fields.push({ no, wire, varint: varint() });
    else if (wire === 2) {
      const len = Number(varint());
      if (i + len > buf.length) throw new Error(`field ${no}: length ${len} past the end`);
      fields.push({ no, wire, bytes: buf.subarray(i, i + len) });
      i += len;
    } else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else throw new Error(`field ${no}: unsupported wire type ${wire}`);
    if (i > buf.length) throw new Error('truncated field');
  }
  return fields;
}

const sub = (fields: Field[], no: number): Buffer | undefined => fields.find((f) => f.no === no && f.wire === 2)?.bytes;
const text = (fields: Field[], no: number): string | undefined => sub(fields, no)?.toString('utf8');

function strings(buf: Buffer, names: readonly string[]): Json {
  const fields = protobufFields(buf);
  const out: Json = {};
  names.forEach((name, i) => {
    const v = text(fields, i + 1);
    if (v !== undefined && v !== '') out[name] = v;
  });
  return out;
}

/**
 * Decode a protobuf SelfSubjectAccessReview or SelfSubjectRulesReview body into its JSON form
 * (`{kind, apiVersion, spec}`); throws an Error saying what is wrong.
 */
export function decodeSelfReview(body: Buffer): Json {
  if (body.length < 4 || !body.subarray(0, 4).equals(MAGIC)) throw new Error('the body does not start with the protobuf magic "k8s\\0"');
  const unknown = protobufFields(body.subarray(4));
  const typeMeta = protobufFields(sub(unknown, 1) ?? Buffer.alloc(0));
  const apiVersion = text(typeMeta, 1) ?? '';
  const kind = text(typeMeta, 2) ?? '';
  const raw = protobufFields(sub(unknown, 2) ?? Buffer.alloc(0));
  const spec = protobufFields(sub(raw, 2) ?? Buffer.alloc(0));
  if (kind === 'SelfSubjectAccessReview') {
    const out: Json = {};
    const ra = sub(spec, 1);
    const nra = sub(spec, 2);
    if (ra) out.resourceAttributes = strings(ra, ['namespace', 'verb', 'group', 'version', 'resource', 'subresource', 'name']);
    if (nra) out.nonResourceAttributes = strings(nra, ['path', 'verb']);
    return { kind, apiVersion, spec: out };
  }
  if (kind === 'SelfSubjectReview') return { kind, apiVersion };
  if (kind === 'SelfSubjectRulesReview') {
    const namespace = text(spec, 1);
    return { kind, apiVersion, spec: namespace ? { namespace } : {} };
  }
  throw new Error(`protobuf bodies are only read for self reviews, not ${JSON.stringify(kind)}`);
}
