// Package randhex makes random names for temporary files, handles and
// process-local owners.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 1 of
// the house, internal/lib. It imports no sessionflow package; every package
// may import it.
package randhex

import (
	"crypto/rand"
	"encoding/hex"
)

// String returns n random bytes in hex (2n characters).
func String(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never returns an error
	return hex.EncodeToString(b)
}
