import countries from 'i18n-iso-countries';

// Assigned code lists kept by others, not by hand: ISO 3166-1 alpha-2 from i18n-iso-countries
// (250 codes, XK included), ISO 4217 from the ICU data Node ships with.
const COUNTRY_CODES: ReadonlySet<string> = new Set(Object.keys(countries.getAlpha2Codes()));
const CURRENCY_CODES: ReadonlySet<string> = new Set(Intl.supportedValuesOf('currency'));

/** `FR`, `fr`: an assigned ISO 3166-1 alpha-2 code, in either case. */
function isCountryCode(value: string): boolean {
  return value.length === 2 && COUNTRY_CODES.has(value.toUpperCase());
}

/** `EUR`, `eur`: an ISO 4217 currency code in use, in either case. */
function isCurrencyCode(value: string): boolean {
  return value.length === 3 && CURRENCY_CODES.has(value.toUpperCase());
}

/** Names of the JSON-schema formats that check them (registered on the request validators). */
export const CODE_FORMATS = {
  'country-code': {
    validate: isCountryCode,
    message: 'must be an ISO 3166-1 alpha-2 country code (e.g. FR)',
  },
  'currency-code': {
    validate: isCurrencyCode,
    message: 'must be an ISO 4217 currency code (e.g. EUR)',
  },
} as const;
