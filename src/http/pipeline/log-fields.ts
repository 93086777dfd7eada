/**
 * The API's query parameters whose values a request line shows: numbers, enums, dates, ids and
 * cursors. Any other value is a search's text (`q`), a parameter a client made up, or a credential
 * put in a URL by mistake: a person's name or e-mail, or a secret, may be in it.
 * test/logs.test.ts holds this list to the query parameters of both OpenAPI documents.
 */
export const SHOWN_QUERY_VALUES: ReadonlySet<string> = new Set([
  'after',
  'archived',
  'bookingId',
  'cityId',
  'cursor',
  'deliveryStatus',
  'kind',
  'limit',
  'publishedAt[gte]',
  'status',
  'tripId',
  'type',
]);
const MAX_LOGGED_QUERY = 512;

/**
 * The query string of a request line as logged: each parameter's value `[redacted]` unless its
 * name is one of SHOWN_QUERY_VALUES, cut at 512 characters; undefined when there is none.
 */
export function loggedQuery(url: string): string | undefined {
  const mark = url.indexOf('?');
  if (mark < 0 || mark === url.length - 1) return undefined;
  const logged = url
    .slice(mark + 1)
    .split('&')
    .map((pair) => {
      const equals = pair.indexOf('=');
      if (equals < 0) return pair;
      const rawName = pair.slice(0, equals);
      let name = rawName;
      try {
        name = decodeURIComponent(rawName.replace(/\+/g, ' '));
      } catch {
        // Not percent-decodable: judged as written.
      }
      return SHOWN_QUERY_VALUES.has(name) ? pair : `${rawName}=[redacted]`;
    })
    .join('&');
  return logged.length > MAX_LOGGED_QUERY ? `${logged.slice(0, MAX_LOGGED_QUERY)}…` : logged;
}
