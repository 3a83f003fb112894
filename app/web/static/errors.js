// What went wrong with a response, in words for the page: our JSON error's message when the
// server sent one, otherwise its status line.
export async function errorMessage(response) {
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) return body.error.message;
  } catch (_) {
    // Not our JSON error: the status line says what happened.
  }
  return `The server answered ${response.status} ${response.statusText}.`;
}
