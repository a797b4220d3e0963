package pgstore

import (
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/shopspring/decimal"
)

// numeric is d as pgx encodes it directly. pgx has no plan for a
// decimal.Decimal: it tries one, builds an error, then asks the
// driver.Valuer for a string, for every element of an array (4 % of a
// node's CPU in a flash sale, in the batches of hot bids and notices).
func numeric(d decimal.Decimal) pgtype.Numeric {
	return pgtype.Numeric{Int: d.Coefficient(), Exp: d.Exponent(), Valid: true}
}
