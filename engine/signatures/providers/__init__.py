"""More providers' schemes, as rows of data (`hookwise.engine.signatures.core.Scheme`), grouped by
what the providers do: `dev` (forges, CI, hosting, monitoring), `business` (CRM, support,
productivity, forms, messaging), `commerce` (payments and shops), and `fields` (proofs in the
body's fields or form: Adyen, Braintree, Mandrill, Figma). Each row follows the
provider's documentation: the signature header, what is signed, the encoding, the signed
timestamp and its default tolerance, and the delivery id that stays the same across retries.
`hookwise.engine.signatures.schemes` registers them beside the first providers."""

from .business import BUSINESS
from .commerce import COMMERCE
from .dev import DEV
from .fields import FIELDS

MORE = (*DEV, *BUSINESS, *COMMERCE, *FIELDS)

__all__ = ["MORE"]
