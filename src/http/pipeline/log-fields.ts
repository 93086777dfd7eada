/** Query parameters whose values are credentials when a client puts them in a URL by mistake. */
const SECRET_NAME = /token|key|secret|password|passwd|signature|auth|session|cookie/i;
const MAX_LOGGED_QUERY = 512;

/**
 * The query string of a request line as logged: the value of any parameter named like a
 * credential replaced by `[redacted]`, cut at 512 characters; undefined when there is none.
 */
export function loggedQuery(url: string): string | undefined {
  const mark = url.indexOf('?');
  if (mark < 0 || mark === url.length - 1) return undefined;
  const logged = url
    .slice(mark + 1)
    .split('&')
    .map((pair) => {
      const equals = pair.indexOf('=');
      const rawName = equals < 0 ? pair : pair.slice(0, equals);
      let name = rawName;
      try {
        name = decodeURIComponent(rawName.replace(/\+/g, ' '));
      } catch {
        // Not percent-decodable: judged as written.
      }
      return equals >= 0 && SECRET_NAME.test(name) ? `${rawName}=[redacted]` : pair;
    })
    .join('&');
  return logged.length > MAX_LOGGED_QUERY ? `${logged.slice(0, MAX_LOGGED_QUERY)}…` : logged;
}
