// Stripe `invoice.payment_failed` / `payment_intent.payment_failed` -> an agent message with the
// amount formatted from cents, and one session per customer. Test-mode events (livemode: false)
// are handled too, marked as such and kept apart (hook:stripe:test:<customer>); to skip them, see
// the condition in rules/examples/stripe.yaml.
// Used by rules/examples/stripe.yaml; module style, as OpenClaw transforms are written.

const ZERO_DECIMAL = new Set(["jpy", "krw", "vnd", "clp", "isk", "ugx"]);

function formatAmount(minor, currency) {
  const code = String(currency || "usd").toLowerCase();
  const value = ZERO_DECIMAL.has(code) ? minor : minor / 100;
  return `${value.toFixed(ZERO_DECIMAL.has(code) ? 0 : 2)} ${code.toUpperCase()}`;
}

export default function transform({ payload, action }) {
  const test = payload.livemode === false; // the dashboard's test mode, `stripe trigger`
  const obj = (payload.data && payload.data.object) || {};
  const minor = obj.amount_due ?? obj.amount ?? 0;
  const who = obj.customer_email || obj.customer || "an unknown customer";
  const reason =
    (obj.last_payment_error && obj.last_payment_error.message) ||
    (obj.last_finalization_error && obj.last_finalization_error.message) ||
    "no reason given";
  return {
    message:
      `${action.message}${test ? " (test mode)" : ""}\n` +
      `Amount: ${formatAmount(minor, obj.currency)} from ${who}.\n` +
      `Reason: ${reason}`,
    sessionKey: `hook:stripe:${test ? "test:" : ""}${obj.customer || payload.id}`,
  };
}
