package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// jv is a JSON value that keeps what a mutant needs and encoding/json
// drops: the order of an object's keys, a repeated key, and a number's
// spelling. Encoded, it is byte for byte what JavaScript's JSON.stringify
// writes for the value JSON.parse reads from it (when it has no repeated key
// and its numbers are spelled as JavaScript prints them).
type jv struct {
	kind  byte // 'o' object, 'a' array, 's' string, 'l' literal (number, true, false, null)
	keys  []string
	vals  []*jv // object values, or array items
	str   string
	lit   string
	rawIn []byte // for 'r': bytes written as they are
}

func jvString(s string) *jv { return &jv{kind: 's', str: s} }
func jvLit(s string) *jv    { return &jv{kind: 'l', lit: s} }
func jvInt(n int64) *jv     { return jvLit(strconv.FormatInt(n, 10)) }
func jvRaw(b string) *jv    { return &jv{kind: 'r', rawIn: []byte(b)} }

// parseJV parses one JSON value.
func parseJV(b []byte) (*jv, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	v, err := readJV(d)
	if err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("trailing data")
	}
	return v, nil
}

func readJV(d *json.Decoder) (*jv, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			v := &jv{kind: 'o'}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				val, err := readJV(d)
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, kt.(string))
				v.vals = append(v.vals, val)
			}
			_, err := d.Token()
			return v, err
		case '[':
			v := &jv{kind: 'a'}
			for d.More() {
				val, err := readJV(d)
				if err != nil {
					return nil, err
				}
				v.vals = append(v.vals, val)
			}
			_, err := d.Token()
			return v, err
		}
	case string:
		return jvString(x), nil
	case json.Number:
		return jvLit(string(x)), nil
	case bool:
		return jvLit(strconv.FormatBool(x)), nil
	case nil:
		return jvLit("null"), nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// encode writes v as JSON.stringify would.
func (v *jv) encode() []byte { return v.appendTo(nil) }

func (v *jv) appendTo(out []byte) []byte {
	switch v.kind {
	case 'o':
		out = append(out, '{')
		for i, k := range v.keys {
			if i > 0 {
				out = append(out, ',')
			}
			out = appendJSString(out, k)
			out = append(out, ':')
			out = v.vals[i].appendTo(out)
		}
		return append(out, '}')
	case 'a':
		out = append(out, '[')
		for i, e := range v.vals {
			if i > 0 {
				out = append(out, ',')
			}
			out = e.appendTo(out)
		}
		return append(out, ']')
	case 's':
		return appendJSString(out, v.str)
	case 'r':
		return append(out, v.rawIn...)
	}
	return append(out, v.lit...)
}

// appendJSString writes s as JSON.stringify writes a string.
func appendJSString(out []byte, s string) []byte {
	out = append(out, '"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"':
			out = append(out, '\\', '"')
		case r == '\\':
			out = append(out, '\\', '\\')
		case r == '\b':
			out = append(out, '\\', 'b')
		case r == '\f':
			out = append(out, '\\', 'f')
		case r == '\n':
			out = append(out, '\\', 'n')
		case r == '\r':
			out = append(out, '\\', 'r')
		case r == '\t':
			out = append(out, '\\', 't')
		case r < 0x20:
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, s[i:i+size]...)
		}
		i += size
	}
	return append(out, '"')
}

// get returns the value of key k of an object (the last one), or nil.
func (v *jv) get(k string) *jv {
	if v == nil || v.kind != 'o' {
		return nil
	}
	for i := len(v.keys) - 1; i >= 0; i-- {
		if v.keys[i] == k {
			return v.vals[i]
		}
	}
	return nil
}

// set replaces the value of key k of an object, or adds the key at the end.
func (v *jv) set(k string, val *jv) {
	for i := range v.keys {
		if v.keys[i] == k {
			v.vals[i] = val
			return
		}
	}
	v.keys = append(v.keys, k)
	v.vals = append(v.vals, val)
}

// del removes key k of an object and reports whether it was there.
func (v *jv) del(k string) bool {
	for i := range v.keys {
		if v.keys[i] == k {
			v.keys = append(v.keys[:i:i], v.keys[i+1:]...)
			v.vals = append(v.vals[:i:i], v.vals[i+1:]...)
			return true
		}
	}
	return false
}

// clone deep-copies v.
func (v *jv) clone() *jv {
	c := *v
	c.keys = append([]string(nil), v.keys...)
	c.vals = make([]*jv, len(v.vals))
	for i, e := range v.vals {
		c.vals[i] = e.clone()
	}
	return &c
}

// at follows a path of object keys and array indexes ("3" for an index).
func (v *jv) at(path ...string) *jv {
	for _, p := range path {
		if v == nil {
			return nil
		}
		if v.kind == 'a' {
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(v.vals) {
				return nil
			}
			v = v.vals[i]
			continue
		}
		v = v.get(p)
	}
	return v
}

// int returns the value of an integer literal.
func (v *jv) int() (int64, bool) {
	if v == nil || v.kind != 'l' {
		return 0, false
	}
	n, err := strconv.ParseInt(v.lit, 10, 64)
	return n, err == nil
}
