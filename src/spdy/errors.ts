/**
 * Typed errors of the SPDY/3.1 layer.
 *
 * A {@link SpdyProtocolError} says what the peer did wrong and how to answer it: connection-scoped
 * errors (no `streamId`) are answered with GOAWAY(`status`) and a close; stream-scoped ones with
 * RST_STREAM(`status`) on `streamId`, after which the connection carries on.
 */

/** Literal codes of {@link SpdyProtocolError}. */
export type SpdyProtocolErrorCode =
  | 'SPDY_BAD_VERSION'
  | 'SPDY_FRAME_TOO_LARGE'
  | 'SPDY_BAD_FRAME'
  | 'SPDY_BAD_HEADER_BLOCK'
  | 'SPDY_BAD_COMPRESSION'
  /** A header block after the owner released the decompressor (`SpdyConnection.releaseHeaderDecompressor`). */
  | 'SPDY_UNEXPECTED_HEADERS'
  | 'SPDY_BAD_STREAM';

/** A protocol violation by the peer. */
export class SpdyProtocolError extends Error {
  override readonly name = 'SpdyProtocolError';

  /**
   * @param code what went wrong.
   * @param message human-readable detail.
   * @param status the GOAWAY status (connection-scoped) or RST_STREAM status (stream-scoped) to send.
   * @param streamId set when the error concerns one stream only.
   */
  constructor(
    readonly code: SpdyProtocolErrorCode,
    message: string,
    readonly status: number,
    readonly streamId?: number,
  ) {
    super(message);
  }

  /** True when only one stream is affected (answer with RST_STREAM, keep the connection). */
  get streamScoped(): boolean {
    return this.streamId !== undefined;
  }
}

/** Emitted (for statuses other than CANCEL) by a stream that the peer reset. */
export class SpdyStreamResetError extends Error {
  override readonly name = 'SpdyStreamResetError';
  readonly code = 'SPDY_STREAM_RESET' as const;

  /** @param streamId the stream; @param status the RST_STREAM status code received. */
  constructor(
    readonly streamId: number,
    readonly status: number,
  ) {
    super(`SPDY stream ${streamId} reset by peer with status ${status}`);
  }
}
