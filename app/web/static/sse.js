// Server-Sent Events from a fetch body (EventSource cannot POST). Yields each event's data
// parsed as JSON; comments (keep-alives) and fields other than data are skipped. Lines end
// with \n, \r\n or a lone \r, and a chunk may end between the \r and the \n.
export async function* readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data = [];
  let skipNewline = false; // the last line ended with \r: a \n starting the next chunk is its
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    if (skipNewline && buffer.startsWith("\n")) buffer = buffer.slice(1);
    skipNewline = false;
    for (;;) {
      const end = buffer.search(/[\r\n]/);
      if (end < 0) break;
      const line = buffer.slice(0, end);
      if (buffer[end] === "\r" && end === buffer.length - 1) skipNewline = true;
      buffer = buffer.slice(end + (buffer.startsWith("\r\n", end) ? 2 : 1));
      if (line === "") {
        if (data.length) yield JSON.parse(data.join("\n"));
        data = [];
      } else if (line === "data") {
        data.push("");
      } else if (line.startsWith("data:")) {
        data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
      }
    }
  }
}
