import type { Dispatcher } from 'undici';
import { RESPONSE_EXCERPT_BYTES, responseExcerpt } from '../webhooks/responseExcerpt.ts';

/** What came of one request: a status and the excerpt of its body, or the error that ended it. */
export type AttemptResponse =
  | { readonly statusCode: number; readonly excerpt: string; readonly error?: undefined }
  | { readonly statusCode?: undefined; readonly excerpt?: undefined; readonly error: Error };

/** Ends a response once its excerpt is complete: the rest of the body is never downloaded. */
class ExcerptComplete extends Error {
  override readonly name = 'ExcerptComplete';
}

/**
 * One delivery request at undici's dispatch level: the status, at most RESPONSE_EXCERPT_BYTES of the body,
 * and the end, reported once through `done`. undici's request() wraps every response body in a stream and
 * every request in promises and an abort-signal listener; a worker makes thousands of requests a second
 * and needs none of it.
 */
export class AttemptHandler implements Dispatcher.DispatchHandler {
  private readonly done: (response: AttemptResponse) => void;
  private controller: Dispatcher.DispatchController | undefined;
  private abortedWith: Error | undefined;
  private statusCode = 0;
  private readonly chunks: Buffer[] = [];
  private length = 0;
  private settled = false;

  constructor(done: (response: AttemptResponse) => void) {
    this.done = done;
  }

  /** Ends the request with `reason` (a deadline): at once, or as soon as undici starts it. */
  abort(reason: Error): void {
    if (this.settled || this.abortedWith) return;
    this.abortedWith = reason;
    this.controller?.abort(reason);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.abortedWith) controller.abort(this.abortedWith);
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number): void {
    this.statusCode = statusCode;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.chunks.push(chunk);
    this.length += chunk.length;
    if (this.length < RESPONSE_EXCERPT_BYTES) return;
    // A receiver cannot make us download more than the excerpt.
    this.answer();
    controller.abort(new ExcerptComplete('the response excerpt is complete'));
  }

  onResponseEnd(): void {
    this.answer();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    // After answer(): the abort that ended an excerpt's body.
    if (this.settled) return;
    this.settled = true;
    this.done({ error });
  }

  private answer(): void {
    if (this.settled) return;
    this.settled = true;
    // Valid text without NUL, within the limit: what Postgres stores (webhooks/responseExcerpt.ts).
    const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    this.done({ statusCode: this.statusCode, excerpt: responseExcerpt(body) });
  }
}
