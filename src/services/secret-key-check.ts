import { ConfigError } from '../config.ts';
import type { SecretBox } from '../lib/secret-box.ts';
import type { InstanceSettingsRepository } from '../repositories/instance-settings-repository.ts';
import type { WebhooksRepository } from '../repositories/webhooks-repository.ts';

const CHECK = 'secret_key_check';
const CHECK_TEXT = 'tourops: this database is sealed under this SECRET_KEY';

interface SecretKeyCheckDeps {
  settings: InstanceSettingsRepository;
  webhooks: WebhooksRepository;
  secrets: SecretBox;
  /** Where the key came from, for the refusal: the variable, or the generated file. */
  keySource: string;
}

/**
 * Refuses to run with a SECRET_KEY that cannot open what the database holds (a restored backup
 * without its key, a changed variable): every signing key would fail to decrypt, every delivery
 * stay unsent. The first start seals a known text under the key; every start opens it again. A
 * database from before the check proves the key with a signing key it holds.
 */
export class SecretKeyCheck {
  constructor(private readonly deps: SecretKeyCheckDeps) {}

  async verify(): Promise<void> {
    const sealed = await this.deps.settings.get(CHECK);
    if (sealed !== undefined) {
      if (this.opens(sealed, CHECK) !== CHECK_TEXT) throw this.refusal();
      return;
    }
    const sample = await this.deps.webhooks.anySigningKey();
    if (sample && this.opens(sample.signingKey, sample.id) === null) throw this.refusal();
    await this.deps.settings.insertIfAbsent(CHECK, this.deps.secrets.encrypt(CHECK_TEXT, CHECK));
  }

  private opens(sealed: string, context: string): string | null {
    try {
      return this.deps.secrets.decrypt(sealed, context);
    } catch {
      return null;
    }
  }

  private refusal(): ConfigError {
    return new ConfigError(
      `SECRET_KEY: the key from ${this.deps.keySource} does not open what this database holds ` +
        '(it was sealed under another key): start with the SECRET_KEY this database was created with',
    );
  }
}
