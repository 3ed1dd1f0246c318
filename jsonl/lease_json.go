package jsonl

import "encoding/json"

// MarshalJSON writes the lease with its handle id under "handleId" and, for
// readers of the earlier key, under "handle" as well.
func (l Lease) MarshalJSON() ([]byte, error) {
	type plain Lease
	return json.Marshal(struct {
		plain
		Handle string `json:"handle"`
	}{plain(l), l.HandleID})
}

// UnmarshalJSON reads a lease, taking its handle id from "handleId" or, in
// a lease written before the rename, from "handle".
func (l *Lease) UnmarshalJSON(b []byte) error {
	type plain Lease
	var v struct {
		plain
		Handle string `json:"handle"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*l = Lease(v.plain)
	if l.HandleID == "" {
		l.HandleID = v.Handle
	}
	return nil
}
