import { Type } from '@sinclair/typebox';
import { At, Nullable, StringEnum, Text } from './schema-kit.ts';
import {
  BOOKING_STATUSES,
  CLIENT_KINDS,
  PAYMENT_MODES,
  PAYMENT_STATUSES,
  PRICING_DISPLAY_MODES,
  TRANSPORT_MODES,
  TRIP_STATUSES,
} from './states.ts';

/**
 * The resources as the API shows them: the response schemas of their reads, and the `object` of
 * the events about them (see change-events.ts), one schema for both.
 */

const Cents = (description: string) =>
  Type.Integer({ description: `${description}, in minor units (cents) of \`currency\`.` });
const CurrencyCode = Type.String({ minLength: 3, maxLength: 3, description: 'ISO 4217.' });
export const NullableString = Nullable(Type.String());

export const Trip = Type.Object(
  {
    id: Type.String(),
    tripNumber: Type.String({ description: 'Per-tenant reference; not a counter.' }),
    title: Type.String(),
    status: StringEnum(TRIP_STATUSES, {
      description: 'Set by the operator console (admin API); new trips are `draft`.',
    }),
    tripMode: StringEnum(['tailor_made', 'template'], {
      description: '`tailor_made` for one client, `template` to be copied.',
    }),
    dateMode: StringEnum(['departure_based', 'range_based'], {
      description: 'Fixed departures, or any start within a range.',
    }),
    publicSlug: Text('Storefront path segment; set at the first publication, then kept.'),
    publishedAt: At('When it was (last) published; null if never.'),
    unpublishedAt: At('Set when taken off the storefront; null while published.'),
    startDate: At('First day, as midnight'),
    endDate: At('Last day, as midnight; null when open-ended.'),
    daysCount: Type.Integer({ description: 'Length of the trip in days, 1-365.' }),
    startCityId: Text("A city of the tenant's library."),
    endCityId: Text("A city of the tenant's library."),
    transportMode: StringEnum(TRANSPORT_MODES),
    pricingDisplayMode: StringEnum(PRICING_DISPLAY_MODES),
    shortDescription: NullableString,
    longDescription: NullableString,
    clientId: Text('The client it is made for, if any.'),
    notes: Text('Internal notes of the operator; never shown on the storefront.'),
    createdAt: At('Created at'),
    updatedAt: At('Last changed at'),
  },
  { $id: 'Trip', additionalProperties: false },
);

export const Booking = Type.Object(
  {
    id: Type.String(),
    bookingNumber: Type.String({ description: 'Per-tenant reference; not a counter.' }),
    tripId: Type.String(),
    tripVersion: Type.Integer({
      description: 'The trip `version` the booking was made on (its snapshot is kept).',
    }),
    status: StringEnum(BOOKING_STATUSES, {
      description: 'Moved by checkout and the payment processor; see the `booking.*` events.',
    }),
    totalRetailCents: Cents('Price paid by the traveller'),
    applicationFeeCents: Cents('Platform fee taken from the total'),
    currency: CurrencyCode,
    travelerName: NullableString,
    travelerEmail: NullableString,
    confirmedAt: At('When it was first confirmed.'),
    cancelledAt: At('When it was cancelled.'),
    departureId: Text('The storefront departure booked, for departure-based trips.'),
    departureStartDate: At('First day of the departure, as midnight'),
    departureEndDate: At('Last day of the departure, as midnight'),
    createdAt: At('Created at'),
    updatedAt: At('Last changed at'),
  },
  { $id: 'Booking', additionalProperties: false },
);

export const Payment = Type.Object(
  {
    id: Type.String(),
    bookingId: Type.String(),
    mode: StringEnum(PAYMENT_MODES, { description: 'How the booking is being paid.' }),
    status: StringEnum(PAYMENT_STATUSES, {
      description: 'Moved by the payment processor; see `payment.succeeded` and `payment.failed`.',
    }),
    label: Type.String({ description: 'Shown to the traveller, e.g. "Deposit 30%".' }),
    amountCents: Cents('Amount'),
    currency: CurrencyCode,
    scheduledFor: At('When an instalment is due.'),
    chargedAt: At('When it succeeded.'),
    isDeposit: Type.Boolean({ description: 'True for the first payment of a booking.' }),
    paymentRail: Text("The processor's rail, e.g. `card`, `sepa_debit`."),
    kind: Type.String({ description: "The processor's payment kind, e.g. `deposit`, `balance`." }),
  },
  { $id: 'Payment', additionalProperties: false },
);

export const Client = Type.Object(
  {
    id: Type.String(),
    kind: StringEnum(CLIENT_KINDS, { description: 'A person or a company.' }),
    displayName: Type.String({ description: 'How the operator refers to the client.' }),
    legalName: Text('Name for invoices, for companies.'),
    email: NullableString,
    phone: NullableString,
    countryIso: Text('ISO 3166-1 alpha-2, upper-case.'),
    language: Text('Preferred language (a BCP 47 tag such as `pt` or `en-GB`).'),
    currency: Text('Preferred currency, ISO 4217, upper-case.'),
    vatId: Text('VAT identification number, for invoices.'),
    tags: Type.Array(Type.String(), { description: 'Free labels of the operator.' }),
    notes: Text('Internal notes of the operator.'),
    archivedAt: At('Set while archived (the `archived` filter).'),
    createdAt: At('Created at'),
    updatedAt: At('Last changed at'),
  },
  { $id: 'Client', additionalProperties: false },
);
