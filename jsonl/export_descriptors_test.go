package jsonl

// RevokeForTest records handle as revoked without touching the lease, as a
// Close that failed between its two steps leaves it.
func (s *Store) RevokeForTest(id, handle string) error { return s.revoke(id, handle) }
