/** The dry runs' examples (a filter's, a transformation's), and the subscription they name. */

export const SUBSCRIPTION = 'whs_01JD3XC8K2V5R7N4T9M6QWZBHF';

/** Request bodies, by operationId. */
export const DRY_RUN_REQUESTS: Record<string, unknown> = {
  testWebhookFilter: {
    filter: { 'data.currency': 'EUR', 'data.amountCents': { $gte: 10000 } },
    subscriptionId: SUBSCRIPTION,
  },
  testWebhookTransformation: {
    code: "function handler(webhook) {\n  const b = webhook.payload.data.object;\n  if (b.status !== 'confirmed') return { ...webhook, cancel: true };\n  webhook.payload = { message: 'Confirmed: ' + b.bookingNumber + ', ' + b.travelerName };\n  return webhook;\n}",
    subscriptionId: SUBSCRIPTION,
  },
};

/** Answers, by `<operationId> <status>`. */
export const DRY_RUN_RESPONSES: Record<string, unknown> = {
  'testWebhookTransformation 200': {
    data: {
      events: [
        {
          id: '0b7e8f52-3c1d-4e7a-9f26-5d8c1a4b7e90',
          type: 'booking.confirmed',
          sequence: 41,
          result: {
            payload: { message: 'Confirmed: BK-4HQ8ZD, Ana Lima' },
            url: 'https://hooks.operator.test/tourops',
            headers: {},
            cancel: false,
          },
        },
        {
          id: '5c2d9e31-7a4b-4f08-8e15-2b6d3f9a0c47',
          type: 'booking.updated',
          sequence: 42,
          result: {
            payload: { message: 'Confirmed: BK-4HQ8ZD, Ana Lima' },
            url: 'https://hooks.operator.test/tourops',
            headers: {},
            cancel: true,
          },
        },
        {
          id: '9a4f1c27-2e8b-4d6a-b3f0-7c5e2d1a8b64',
          type: 'booking.created',
          sequence: 43,
          error: "TypeError: cannot read property 'bookingNumber' of undefined (line 2)",
        },
      ],
    },
  },
  'testWebhookFilter 200': {
    data: {
      matches: true,
      events: [
        {
          id: '0b7e8f52-3c1d-4e7a-9f26-5d8c1a4b7e90',
          type: 'payment.succeeded',
          sequence: 41,
          matches: true,
        },
        {
          id: '5c2d9e31-7a4b-4f08-8e15-2b6d3f9a0c47',
          type: 'payment.succeeded',
          sequence: 42,
          matches: false,
        },
      ],
    },
  },
};
