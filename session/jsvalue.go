package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// parseJSValue decodes JSON into the values JavaScript's JSON.parse gives:
// objects as map[string]any (a repeated key keeps its last value) and arrays
// as []any; numbers stay json.Number, as spelled, and jsNumber gives their
// JavaScript value.
func parseJSValue(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	return v, nil
}

// jsNumber returns the JavaScript value of a number of parseJSValue (±Inf
// beyond the float64 range); ok is false when v is not a number.
func jsNumber(v any) (f float64, ok bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, _ = strconv.ParseFloat(string(n), 64)
	return f, true
}

// jsKey renders a value of parseJSValue so that two values have the same key
// exactly when JavaScript's deep JSON equality (the harness's
// isDeepEqualJson: === on leaves, key order ignored) holds between them.
func jsKey(v any) string {
	var b strings.Builder
	writeJSKey(&b, v)
	return b.String()
}

func writeJSKey(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case json.Number:
		f, _ := jsNumber(x)
		if f == 0 {
			f = 0 // -0 === 0
		}
		b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	case float64:
		if x == 0 {
			x = 0 // -0 === 0
		}
		b.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
	case string:
		q, _ := json.Marshal(x)
		b.Write(q)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSKey(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			q, _ := json.Marshal(k)
			b.Write(q)
			b.WriteByte(':')
			writeJSKey(b, x[k])
		}
		b.WriteByte('}')
	default:
		fmt.Fprintf(b, "%v", x)
	}
}
