package wire

import "encoding/json"

// MarshalJSON writes the child with its mode under "mode" and, for readers
// of the earlier name, under "kind" as well.
func (c LoopChild) MarshalJSON() ([]byte, error) {
	type plain LoopChild
	return json.Marshal(struct {
		plain
		Kind string `json:"kind"`
	}{plain(c), c.Mode})
}

// UnmarshalJSON reads a child, taking its mode from "mode" or, in JSON
// written before the rename, from "kind".
func (c *LoopChild) UnmarshalJSON(b []byte) error {
	type plain LoopChild
	var v struct {
		plain
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*c = LoopChild(v.plain)
	if c.Mode == "" {
		c.Mode = v.Kind
	}
	return nil
}
