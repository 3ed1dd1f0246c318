// A sessionflow client written from docs/API.md ("HTTP API") alone: it
// reaches the worker over HTTP only, never its disk. No dependencies: the
// global fetch and a Server-Sent Events reader of its own. Node 22.18+
// runs it as is (type stripping):
//
//   node client.ts --url http://127.0.0.1:8080 --session ID --prompt TEXT
//     [--message-id M] [--token T] [--probe PATH] [--timeout-ms N]
//
// It lists the sessions, prints the session's history (GET .../events as
// JSON lines), opens the live text stream (GET .../live) and the events
// stream (GET .../events as Server-Sent Events, after the last seq read),
// sends the prompt as a followup (POST .../messages), and prints what the
// two streams show until the turn that claimed the message ends: every
// live chunk, reset and end, every stored event, the stored answer and the
// live text it assembled. Then it asks for an unknown session and prints
// the typed error. --probe reads a directory from the filesystem and
// prints whether it may (run under `node --permission`, it may not). One
// line per fact, "<what> key=value ...": strings are JSON.

import { readdirSync } from "node:fs";

type Options = {
  url: string;
  session: string;
  prompt: string;
  messageId: string;
  token: string;
  probe: string;
  timeoutMs: number;
};

type StoredEvent = {
  type: string;
  seq: number;
  time: number;
  data: Record<string, any>;
};

type ErrorBody = { error: { type: string; message: string; details?: Record<string, unknown> } };

type SSEMessage = { id: string; event: string; data: string };

type LiveData = {
  turn: number;
  step: number;
  attempt: number;
  offset?: number;
  text?: string;
  kind?: string;
};

// ApiError is a typed error of the API: its class (error.type) and status.
class ApiError extends Error {
  status: number;
  type: string;
  constructor(status: number, body: ErrorBody) {
    super(body.error.message);
    this.status = status;
    this.type = body.error.type;
  }
}

function parseArgs(argv: string[]): Options {
  const o: Options = { url: "", session: "", prompt: "", messageId: "", token: "", probe: "", timeoutMs: 120000 };
  for (let i = 0; i < argv.length; i += 2) {
    const v = argv[i + 1] ?? "";
    switch (argv[i]) {
      case "--url": o.url = v.replace(/\/+$/, ""); break;
      case "--session": o.session = v; break;
      case "--prompt": o.prompt = v; break;
      case "--message-id": o.messageId = v; break;
      case "--token": o.token = v; break;
      case "--probe": o.probe = v; break;
      case "--timeout-ms": o.timeoutMs = Number(v); break;
      default: throw new Error(`unknown argument ${argv[i]}`);
    }
  }
  if (!o.url || !o.session || !o.prompt) {
    throw new Error("--url, --session and --prompt are required");
  }
  return o;
}

const opts = parseArgs(process.argv.slice(2));

function out(line: string): void {
  process.stdout.write(line + "\n");
}

function headers(extra: Record<string, string> = {}): Record<string, string> {
  const h: Record<string, string> = { ...extra };
  if (opts.token) h["Authorization"] = `Bearer ${opts.token}`;
  return h;
}

function path(id: string, rest = ""): string {
  return `/v1/sessions/${encodeURIComponent(id)}${rest}`;
}

// call sends a request and returns its JSON answer, or throws the typed
// error the API answered.
async function call(method: string, p: string, body?: unknown): Promise<any> {
  const init: RequestInit = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const resp = await fetch(opts.url + p, init);
  const text = await resp.text();
  if (!resp.ok) throw new ApiError(resp.status, JSON.parse(text) as ErrorBody);
  return JSON.parse(text);
}

// storedEvents reads the stored events after seq `after` as JSON lines.
async function storedEvents(id: string, after: number): Promise<StoredEvent[]> {
  const resp = await fetch(opts.url + path(id, `/events?after=${after}`), { headers: headers() });
  const text = await resp.text();
  if (!resp.ok) throw new ApiError(resp.status, JSON.parse(text) as ErrorBody);
  return text.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as StoredEvent);
}

// follow reads the Server-Sent Events of path and calls onMessage for each
// (comments are dropped), until the stream ends or signal aborts. It
// resolves once the response's headers are in (the server follows), to
// the reading's promise, wrapped (an async function would wait for it).
async function follow(p: string, extra: Record<string, string>, signal: AbortSignal,
  onMessage: (m: SSEMessage) => void): Promise<{ done: Promise<void> }> {
  const resp = await fetch(opts.url + p, { headers: headers({ Accept: "text/event-stream", ...extra }), signal });
  if (!resp.ok || resp.body === null) {
    throw new ApiError(resp.status, JSON.parse(await resp.text()) as ErrorBody);
  }
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  const read = async (): Promise<void> => {
    let buf = "";
    let cur: SSEMessage = { id: "", event: "", data: "" };
    let hasData = false;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf += value;
        for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
          let line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line.endsWith("\r")) line = line.slice(0, -1);
          if (line === "") {
            if (hasData) onMessage({ ...cur, event: cur.event || "message" });
            cur = { id: cur.id, event: "", data: "" };
            hasData = false;
            continue;
          }
          if (line.startsWith(":")) continue;
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let value = colon < 0 ? "" : line.slice(colon + 1);
          if (value.startsWith(" ")) value = value.slice(1);
          if (field === "data") {
            cur.data = hasData ? cur.data + "\n" + value : value;
            hasData = true;
          } else if (field === "event") {
            cur.event = value;
          } else if (field === "id") {
            cur.id = value;
          }
        }
      }
    } catch (e) {
      if (!signal.aborted) throw e;
    }
  };
  return { done: read() };
}

// textOf is the text of a message's content blocks.
function textOf(message: any): string {
  const content: any[] = message?.content ?? [];
  return content.filter((b) => b.type === "text").map((b) => String(b.text)).join("");
}

function describe(e: StoredEvent): string {
  let line = `seq=${e.seq} type=${e.type}`;
  if (e.type === "user/message") {
    line += ` id=${JSON.stringify(e.data.id)} text=${JSON.stringify(textOf(e.data))}`;
  } else if (e.type === "assistant/message") {
    line += ` turn=${e.data.turn} step=${e.data.step} text=${JSON.stringify(textOf(e.data.message))}`;
  } else if (e.type === "turn/start" || e.type === "turn/end") {
    line += ` turn=${e.data.turn}`;
    if (e.data.reason) line += ` reason=${e.data.reason.kind}`;
  }
  return line;
}

async function main(): Promise<void> {
  const deadline = setTimeout(() => {
    out("timeout");
    process.exit(3);
  }, opts.timeoutMs);

  if (opts.probe) {
    try {
      readdirSync(opts.probe);
      out(`probe path=${JSON.stringify(opts.probe)} readable`);
    } catch (e: any) {
      out(`probe path=${JSON.stringify(opts.probe)} denied code=${e.code}`);
    }
  }

  // The sessions, with their state.
  const list = await call("GET", "/v1/sessions");
  for (const s of list.sessions) {
    out(`session id=${JSON.stringify(s.id)} state=${s.state} turns=${s.turns} lastSeq=${s.lastSeq}`);
  }

  // The session's history.
  const history = await storedEvents(opts.session, -1);
  let lastSeq = -1;
  for (const e of history) {
    out(`history ${describe(e)}`);
    lastSeq = e.seq;
  }

  // Both streams open before the message goes, so nothing is missed.
  const ctl = new AbortController();
  const live = new Map<string, string>(); // turn/step -> text shown
  const liveEnded = new Set<string>();
  const liveStream = await follow(path(opts.session, "/live"), {}, ctl.signal, (m) => {
    const d = JSON.parse(m.data) as LiveData;
    const key = `${d.turn}/${d.step}`;
    if (m.event === "chunk") {
      if (d.kind !== "text") return;
      out(`live chunk turn=${d.turn} step=${d.step} attempt=${d.attempt} offset=${d.offset} text=${JSON.stringify(d.text)}`);
      live.set(key, (live.get(key) ?? "") + d.text);
    } else if (m.event === "reset") {
      out(`live reset turn=${d.turn} step=${d.step} attempt=${d.attempt}`);
      live.delete(key);
    } else if (m.event === "end") {
      out(`live end turn=${d.turn} step=${d.step} attempt=${d.attempt}`);
      liveEnded.add(key);
    } else if (m.event === "error") {
      out(`live error data=${m.data}`);
    }
  });
  out("stream live open");

  // The stored events after the history, as they come: the turn that
  // claims the message is the one whose turn/start precedes its
  // user/message (the message may be stored before the POST answers).
  const claimed = new Map<string, number>(); // message id -> turn
  const endedTurns = new Map<number, string>(); // turn -> reason
  const answers = new Map<number, Array<{ key: string; text: string }>>();
  let turnNow = -1;
  let streamError = "";
  let wake: () => void = () => {};
  const eventsStream = await follow(path(opts.session, "/events"), { "Last-Event-ID": String(lastSeq) }, ctl.signal, (m) => {
    if (m.event === "error") {
      out(`events error data=${m.data}`);
      streamError = m.data;
    } else {
      const e = JSON.parse(m.data) as StoredEvent;
      out(`event id=${m.id} ${describe(e)}`);
      if (e.type === "turn/start") turnNow = e.data.turn;
      if (e.type === "user/message") claimed.set(e.data.id, turnNow);
      if (e.type === "assistant/message") {
        const list = answers.get(e.data.turn) ?? [];
        list.push({ key: `${e.data.turn}/${e.data.step}`, text: textOf(e.data.message) });
        answers.set(e.data.turn, list);
      }
      if (e.type === "turn/end") endedTurns.set(e.data.turn, e.data.reason?.kind ?? "");
    }
    wake();
  });
  out(`stream events open after=${lastSeq}`);

  const body: Record<string, unknown> = { text: opts.prompt, mode: "followup" };
  if (opts.messageId) body.messageId = opts.messageId;
  const sent = await call("POST", path(opts.session, "/messages"), body);
  out(`sent messageId=${JSON.stringify(sent.messageId)} target=${sent.target}`);

  const myTurn = (): number => claimed.get(sent.messageId) ?? -1;
  while (streamError === "" && !(myTurn() >= 0 && endedTurns.has(myTurn()))) {
    await new Promise<void>((r) => { wake = r; });
  }
  if (streamError !== "") throw new Error(`the events stream failed: ${streamError}`);
  const turn = myTurn();
  out(`turn ${turn} ended reason=${endedTurns.get(turn)}`);
  const mine = answers.get(turn) ?? [];
  const answerKeys = mine.map((a) => a.key);
  const answer = mine.map((a) => a.text).join("");
  // The live end of each step comes on its own stream: wait for it a
  // moment.
  for (let i = 0; i < 50 && !answerKeys.every((k) => liveEnded.has(k)); i++) {
    await new Promise((r) => setTimeout(r, 100));
  }
  ctl.abort();
  await Promise.allSettled([liveStream.done, eventsStream.done]);
  out(`final text=${JSON.stringify(answer)}`);
  out(`live text=${JSON.stringify(answerKeys.map((k) => live.get(k) ?? "").join(""))} ended=${answerKeys.every((k) => liveEnded.has(k))}`);

  // A typed error.
  for (const [method, p] of [["GET", path("no-such-session", "/events")], ["POST", path("no-such-session", "/messages")]]) {
    try {
      await call(method, p, method === "POST" ? { text: "hello?" } : undefined);
      out(`error ${method} ${p} none`);
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      out(`error ${method} ${p} status=${e.status} type=${e.type} message=${JSON.stringify(e.message)}`);
    }
  }
  clearTimeout(deadline);
  out("done");
}

main().catch((e) => {
  if (e instanceof ApiError) {
    out(`failed status=${e.status} type=${e.type} message=${JSON.stringify(e.message)}`);
  } else {
    out(`failed ${String(e?.stack ?? e)}`);
  }
  process.exit(1);
});
