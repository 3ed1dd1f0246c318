package agent

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// MaxCallHint bounds CallRef.Hint, in bytes.
const MaxCallHint = 64

// hintKeys are the argument fields a hint is taken from, in order.
var hintKeys = []string{"command", "cmd", "path", "file_path", "pattern", "url", "query"}

// CallHint returns a short hint of a tool call's arguments (the model's raw
// JSON text) for its activity summary: the first line of the first string
// field among command, cmd, path, file_path, pattern, url and query, cut to
// MaxCallHint bytes (ending "…" when cut); "" when there is none.
func CallHint(arguments string) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal([]byte(arguments), &fields) != nil {
		return ""
	}
	for _, k := range hintKeys {
		var v string
		if raw, ok := fields[k]; !ok || json.Unmarshal(raw, &v) != nil {
			continue
		}
		v, _, cut := strings.Cut(strings.TrimSpace(v), "\n")
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if len(v) > MaxCallHint {
			n := MaxCallHint - len("…")
			for n > 0 && !utf8.RuneStart(v[n]) {
				n--
			}
			v, cut = v[:n], true
		}
		if cut {
			v += "…"
		}
		return v
	}
	return ""
}
