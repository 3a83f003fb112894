// Asks one question through the AI SDK's own chat (AbstractChat, which useChat wraps), so
// that the stream is read the way a useChat front-end reads it: an `error` part ends the
// reading there, and the `body` option's fields go beside the messages. The state is the
// plain object a framework binding would keep. Prints the assistant's message, the chat's
// status and error as JSON, for tests/http/test_ai_sdk.py.
//
//   node chat.mjs BASE_URL QUESTION [BODY_JSON]
import { AbstractChat, DefaultChatTransport } from "ai";

const [base, question, bodyJson] = process.argv.slice(2);

class PlainState {
  constructor() {
    this.status = "ready";
    this.error = undefined;
    this.messages = [];
  }
  pushMessage(message) {
    this.messages = this.messages.concat(message);
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  }
  snapshot(thing) {
    return structuredClone(thing);
  }
}

const errors = [];
const chat = new AbstractChat({
  transport: new DefaultChatTransport({ api: `${base}/api/chat` }),
  state: new PlainState(),
  onError: (error) => errors.push(String(error.message ?? error)),
});
await chat.sendMessage({ text: question }, bodyJson ? { body: JSON.parse(bodyJson) } : undefined);

const answer = chat.messages.findLast((message) => message.role === "assistant") ?? null;
const parts = answer ? answer.parts : [];
console.log(JSON.stringify({
  status: chat.status,
  error: chat.error ? chat.error.message : null,
  errors,
  text: parts.filter((p) => p.type === "text").map((p) => p.text).join(""),
  sources: parts.filter((p) => p.type === "source-url").map((p) => ({ url: p.url, title: p.title })),
  metadata: answer ? answer.metadata ?? null : null,
}));
