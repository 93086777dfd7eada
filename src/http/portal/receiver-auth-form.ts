import { html } from 'ghtml';
import { SECRET_MASK } from '../../domain/redaction.ts';
import type { Subscription } from '../../services/subscription-view.ts';
import { FieldFault, type Form, type Reader } from './forms.ts';
import { time } from './layout.ts';

/**
 * Receiver authentication in the endpoint forms: extra headers, the scheme and the client
 * certificate, each secret write-only. A stored header value shows as `***` and a stored password,
 * client secret or private key not at all; left so, the edit keeps it (the API's `***`), and the
 * API's own rules decide when that is refused (another origin, another token server). The fields
 * become the API's `headers`, `auth` and `clientCertificate` members (see receiverAuthReaders).
 */

/** The form fields the readers below consume besides their own member's name. */
export const RECEIVER_AUTH_FIELDS = [
  'auth.username',
  'auth.password',
  'auth.tokenUrl',
  'auth.clientId',
  'auth.clientSecret',
  'auth.scope',
  'auth.audience',
  'clientCertificate.certificate',
  'clientCertificate.privateKey',
  'clientCertificate.remove',
] as const;

const text = (form: Form, name: string): string => {
  const value = form[name];
  return typeof value === 'string' ? value.trim() : '';
};

/**
 * Readers of the three members (a field the form lacks leaves its member out). `edit`: an empty
 * secret field keeps the stored one and an empty choice removes; on a new endpoint an empty field
 * is an empty value and an empty choice is none.
 */
export function receiverAuthReaders(edit: boolean): Record<string, Reader> {
  const secret = (form: Form, name: string) => text(form, name) || (edit ? SECRET_MASK : '');
  const optional = (form: Form, name: string) => text(form, name) || undefined;
  return {
    headers: (form) => {
      const lines = form.headers;
      if (lines === undefined) return undefined;
      if (typeof lines !== 'string') return lines;
      const headers = headerLines(lines);
      if (Object.keys(headers).length > 0) return headers;
      return edit ? null : undefined;
    },
    auth: (form) => {
      const type = form.auth;
      if (type === undefined) return undefined;
      if (type === '') return edit ? null : undefined;
      if (type === 'basic') {
        return {
          type,
          username: text(form, 'auth.username'),
          password: secret(form, 'auth.password'),
        };
      }
      if (type === 'oauth2_client_credentials') {
        const scope = optional(form, 'auth.scope');
        const audience = optional(form, 'auth.audience');
        return {
          type,
          tokenUrl: text(form, 'auth.tokenUrl'),
          clientId: text(form, 'auth.clientId'),
          clientSecret: secret(form, 'auth.clientSecret'),
          ...(scope === undefined ? {} : { scope }),
          ...(audience === undefined ? {} : { audience }),
        };
      }
      // Anything else goes to the schema as sent, which names the choices.
      return { type };
    },
    clientCertificate: (form) => {
      if (form['clientCertificate.remove'] === 'true') return null;
      // PEM goes as pasted (its line breaks are its own); only a blank field counts as empty.
      const pem = (name: string) => (text(form, name) === '' ? '' : (form[name] as string));
      const certificate = pem('clientCertificate.certificate');
      const privateKey = pem('clientCertificate.privateKey');
      if (certificate === '' && privateKey === '') return undefined;
      return { certificate, privateKey };
    },
  };
}

/**
 * `Name: value` lines as a headers object (blank lines skipped). A line without a colon, or a
 * name given twice, is a fault of the field: an object would silently keep only the last.
 */
function headerLines(lines: string): Record<string, string> {
  const headers: Record<string, string> = Object.create(null);
  const faults: string[] = [];
  lines.split(/\r?\n/).forEach((line, i) => {
    if (line.trim() === '') return;
    const colon = line.indexOf(':');
    if (colon <= 0) {
      faults.push(`line ${i + 1} is not "Name: value"`);
      return;
    }
    const name = line.slice(0, colon).trim();
    if (Object.hasOwn(headers, name)) faults.push(`line ${i + 1} gives ${name} again`);
    else headers[name] = line.slice(colon + 1).trim();
  });
  if (faults.length > 0) throw new FieldFault(faults.join('; '));
  return { ...headers };
}

/**
 * The section of the new-endpoint and edit forms; `s` null on a new endpoint. Only the Basic
 * password is a password field: browsers take two in one form for two sign-in forms run together
 * (Chromium warns), and the client secret is a machine's credential no password manager should
 * offer to save; it is masked by CSS where the browser can.
 */
export function receiverAuthFields(s: Subscription | null): string {
  const auth = s?.auth ?? null;
  const basic = auth?.type === 'basic' ? auth : null;
  const oauth = auth?.type === 'oauth2_client_credentials' ? auth : null;
  const certificate = s?.clientCertificate ?? null;
  const headerText = Object.keys(s?.headers ?? {})
    .map((name) => `${name}: ${SECRET_MASK}`)
    .join('\n');
  const set = headerText !== '' || auth !== null || certificate !== null;
  const keep = (stored: boolean) =>
    stored ? 'stored: leave empty to keep it' : 'write-only: never shown again';
  const choice = (value: string, label: string) =>
    html`<option value="${value}"!${(auth?.type ?? '') === value ? ' selected' : ''}>${label}</option>`;
  return html`<details!${set ? ' open' : ''}><summary>Receiver authentication (HTTPS endpoints behind a gateway)</summary>
<label for="headers">Extra headers: one <code>Name: value</code> a line!${s === null ? '' : ` (a stored value shows as ${SECRET_MASK}: leave it to keep the value)`}</label>
<textarea id="headers" name="headers" rows="3" class="code" spellcheck="false" autocomplete="off" placeholder="X-Api-Key: k_live_3f9a1c">${headerText}</textarea>
<label for="auth">Authentication</label>
<select id="auth" name="auth">!${choice('', 'none')}!${choice('basic', 'HTTP Basic')}!${choice('oauth2_client_credentials', 'OAuth2 client credentials')}</select>
<fieldset class="stack"><legend>HTTP Basic</legend>
<label for="auth-username">Username</label>
<input id="auth-username" name="auth.username" autocomplete="off" value="${basic?.username ?? ''}">
<label for="auth-password">Password</label>
<input id="auth-password" name="auth.password" type="password" autocomplete="new-password" placeholder="${keep(basic !== null)}">
</fieldset>
<fieldset class="stack"><legend>OAuth2 client credentials</legend>
<label for="auth-tokenUrl">Token URL (HTTPS)</label>
<input id="auth-tokenUrl" name="auth.tokenUrl" type="url" autocomplete="off" value="${oauth?.tokenUrl ?? ''}">
<label for="auth-clientId">Client id</label>
<input id="auth-clientId" name="auth.clientId" autocomplete="off" value="${oauth?.clientId ?? ''}">
<label for="auth-clientSecret">Client secret</label>
<input id="auth-clientSecret" name="auth.clientSecret" class="secret" autocomplete="off" spellcheck="false" placeholder="${keep(oauth !== null)}">
<label for="auth-scope">Scope (optional)</label>
<input id="auth-scope" name="auth.scope" autocomplete="off" value="${oauth?.scope ?? ''}">
<label for="auth-audience">Audience (optional)</label>
<input id="auth-audience" name="auth.audience" autocomplete="off" value="${oauth?.audience ?? ''}">
</fieldset>
<fieldset class="stack"><legend>Client certificate (mutual TLS)</legend>
!${
    certificate === null
      ? html`<p class="hint">None.</p>`
      : html`<p class="hint">Stored: <code>${certificate.subject}</code>, expires !${time(certificate.notAfter)}. Paste a certificate and its key to replace it; leave both empty to keep it.</p>
<label class="check"><input type="checkbox" name="clientCertificate.remove" value="true"> Remove the client certificate</label>`
  }
<label for="cert">Certificate (PEM, then any intermediates)</label>
<textarea id="cert" name="clientCertificate.certificate" rows="3" class="code" spellcheck="false" placeholder="-----BEGIN CERTIFICATE-----"></textarea>
<label for="cert-key">Private key (PEM, unencrypted; write-only)</label>
<textarea id="cert-key" name="clientCertificate.privateKey" rows="3" class="code" spellcheck="false" autocomplete="off" placeholder="-----BEGIN PRIVATE KEY-----"></textarea>
</fieldset>
</details>`;
}
