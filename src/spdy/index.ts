/**
 * Public API of the SPDY/3.1 layer (the subset Kubernetes exec/attach/port-forward use).
 */
export { GoAwayStatus, RstStatus } from './codes.js';
export {
  DEFAULT_MAX_QUEUED_BYTES,
  DEFAULT_OPEN_TIMEOUT_MS,
  SpdyConnection,
  type OpenStreamOptions,
  type SpdyConnectionOptions,
  type SpdyLogger,
} from './connection.js';
export { SPDY3_DICTIONARY, SPDY3_DICTIONARY_ID } from './dictionary.js';
export { SpdyProtocolError, SpdyStreamResetError, type SpdyProtocolErrorCode } from './errors.js';
export {
  DEFAULT_MAX_FRAME_SIZE,
  encodeFrame,
  FLAG_CLEAR_SETTINGS,
  FLAG_FIN,
  FLAG_UNIDIRECTIONAL,
  FrameParser,
  FrameType,
  MAX_FRAME_PAYLOAD,
  SPDY_VERSION,
  type FrameParserOptions,
  type SpdyFrame,
  type SpdySetting,
} from './frame.js';
export {
  decodeHeaderPairs,
  encodeHeaderPairs,
  HeaderCompressor,
  HeaderDecompressor,
  headerValue,
  MAX_HEADER_BLOCK_BYTES,
  normalizeHeaders,
  type SpdyHeaders,
  type SpdyHeadersInit,
} from './header-block.js';
export { MAX_DATA_FRAME_BYTES, SpdyStream } from './stream.js';
