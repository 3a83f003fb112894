// Reads one answer from /api/chat the way useChat does: the AI SDK's DefaultChatTransport
// posts the messages and parses the UI message stream, readUIMessageStream assembles the
// message. Prints what the SDK made of it, as JSON, for tests/http/test_ai_sdk.py.
//
//   node read_ui_stream.mjs BASE_URL MESSAGES_JSON
import { DefaultChatTransport, readUIMessageStream } from "ai";

const [base, messagesJson] = process.argv.slice(2);
const messages = JSON.parse(messagesJson).map((message, index) => ({
  id: `m${index}`,
  role: message.role,
  parts: [{ type: "text", text: message.text }],
}));

const headers = {};
const transport = new DefaultChatTransport({
  api: `${base}/api/chat`,
  fetch: async (url, init) => {
    const response = await fetch(url, init);
    response.headers.forEach((value, key) => { headers[key] = value; });
    return response;
  },
});
const chunks = await transport.sendMessages({
  chatId: "test-chat",
  messages,
  trigger: "submit-message",
  messageId: undefined,
  abortSignal: undefined,
});

const seen = [];
const [forMessage, forTypes] = chunks.tee();
const reading = (async () => {
  for await (const chunk of forTypes) seen.push(chunk);
})();
let last;
const errors = [];
for await (const message of readUIMessageStream({
  stream: forMessage,
  onError: (error) => errors.push(String(error)),
})) {
  last = message;
}
await reading;

const parts = last ? last.parts : [];
console.log(JSON.stringify({
  header: headers["x-vercel-ai-ui-message-stream"] ?? null,
  chunks: seen,
  text: parts.filter((p) => p.type === "text").map((p) => p.text).join(""),
  sources: parts.filter((p) => p.type === "source-url").map((p) => ({ url: p.url, title: p.title })),
  data: parts.filter((p) => p.type.startsWith("data-")),
  metadata: last ? last.metadata ?? null : null,
  errors,
}));
