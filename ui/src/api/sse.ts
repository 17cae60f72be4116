/** One parsed server-sent event. */
export interface SseMessage {
  event: string;
  data: string;
  /** The stream's last event id as of this message (the `id:` field, kept until the next one). */
  lastEventId: string;
}

/**
 * Incremental parser of a `text/event-stream` body (WHATWG HTML §9.2.6). Feed it decoded
 * chunks; it calls `onMessage` for each complete event. Used instead of `EventSource`, which
 * cannot send the `Authorization` header.
 */
export class SseParser {
  private buf = '';
  private event = '';
  private data: string[] = [];
  /** The last `id:` seen, even on a message without data (which sets it and fires nothing). */
  lastEventId = '';
  constructor(private readonly onMessage: (m: SseMessage) => void) {}

  push(chunk: string): void {
    this.buf += chunk;
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buf);
      if (!m) break;
      // A lone trailing \r may be the first half of \r\n: wait for more.
      if (m[0] === '\r' && m.index === this.buf.length - 1) break;
      const line = this.buf.slice(0, m.index);
      this.buf = this.buf.slice(m.index + m[0].length);
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === '') {
      if (this.data.length) this.onMessage({ event: this.event || 'message', data: this.data.join('\n'), lastEventId: this.lastEventId });
      this.event = '';
      this.data = [];
      return;
    }
    if (line.startsWith(':')) return;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? '' : line.slice(i + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
    else if (field === 'id' && !value.includes('\0')) this.lastEventId = value;
  }
}
