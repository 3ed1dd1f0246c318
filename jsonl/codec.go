package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Header-line errors of FORMAT.md §2.3. They are wrapped into a corruption error
// that names the session and the raw log.
var (
	errHeaderless      = errors.New("empty or header-less session log")
	errHeaderNotJSON   = errors.New("corrupt session log: header line is not valid JSON")
	errHeaderNotObject = errors.New("corrupt session log: first line is not a JSON object")
	errHeaderShape     = errors.New("corrupt session log: first line is not a session header")
	errRetiredFields   = errors.New("session header uses retired policy baseline fields")
)

// versionError is the direction-aware refusal of FORMAT.md §2.4.
type versionError struct {
	id      string
	version float64
}

func (e *versionError) Error() string {
	v := strconv.FormatFloat(e.version, 'f', -1, 64)
	if e.version > wire.FormatVersion {
		return fmt.Sprintf("session %q uses log format v%s, but this harness reads only v%d: the log was written by a newer harness — upgrade the harness to open it", e.id, v, wire.FormatVersion)
	}
	return fmt.Sprintf("session %q uses log format v%s, older than the supported v%d, and this build ships no upgrade path for it", e.id, v, wire.FormatVersion)
}

// formatRefusal maps a version error to the format refusal naming the raw
// log at path; it returns nil for any other error.
func formatRefusal(id, path string, err error) *wire.StoreError {
	var ve *versionError
	if !errors.As(err, &ve) {
		return nil
	}
	return &wire.StoreError{Code: CodeFormatUnsupported, SessionID: id, Path: path, Err: err,
		Message: fmt.Sprintf("%s (raw log: %s)", ve.Error(), path)}
}

var (
	headerRequired = []string{"type", "version", "id", "createdAt", "isSeeded", "delegationDepth"}
	headerOptional = map[string]bool{"cwd": true, "parentSession": true, "origin": true, "agentPreset": true}
)

// headerVersion returns the header's version when it is a JSON number; a
// version of any other JSON type (a string, null, an object) is a shape
// error, never a format version.
func headerVersion(raw map[string]json.RawMessage) (float64, bool) {
	v := bytes.TrimSpace(raw["version"])
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return 0, false
	}
	var f float64
	if json.Unmarshal(v, &f) != nil {
		return 0, false
	}
	return f, true
}

// parseHeaderLine decodes one header line (without its newline) following the
// check order of FORMAT.md §2.3: JSON, object, version guard, retired fields, shape.
func parseHeaderLine(line []byte) (wire.Header, error) {
	var h wire.Header
	if !json.Valid(line) {
		return h, errHeaderNotJSON
	}
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return h, errHeaderNotObject
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &raw); err != nil {
		return h, errHeaderNotJSON
	}
	version, isNumber := headerVersion(raw)
	if isNumber {
		if version == 0 && bytes.HasPrefix(bytes.TrimSpace(raw["version"]), []byte("-")) {
			// JSON.parse reads -0 as 0, but no writer of either format
			// writes it: the header must be lossless JSON (FORMAT.md §1.4).
			return h, fmt.Errorf("corrupt session log: header: %w", &session.LosslessError{Detail: "negative zero " + string(bytes.TrimSpace(raw["version"]))})
		}
		if version == wire.FormatVersionV0 {
			return parseHeaderV0(raw)
		}
		if version != wire.FormatVersion {
			return h, &versionError{id: stringifyJSON(raw["id"]), version: version}
		}
	}
	if err := refuseRetiredFields(raw); err != nil {
		return h, err
	}
	for _, k := range headerRequired {
		if _, ok := raw[k]; !ok {
			return h, errHeaderShape
		}
	}
	for k := range raw {
		if !headerOptional[k] && !contains(headerRequired, k) {
			return h, errHeaderShape
		}
	}
	if !isNumber {
		return h, errHeaderShape
	}
	h.Version = wire.FormatVersion
	if err := decodeHeaderCore(raw, &h); err != nil {
		return h, err
	}
	if json.Unmarshal(raw["isSeeded"], &h.IsSeeded) != nil || string(bytes.TrimSpace(raw["isSeeded"])) == "null" {
		return h, errHeaderShape
	}
	if err := finishHeader(raw, &h); err != nil {
		return h, err
	}
	return h, nil
}

// refuseRetiredFields refuses a header, of any format, that carries the
// retired policy fields.
func refuseRetiredFields(raw map[string]json.RawMessage) error {
	if _, ok := raw["sandboxMode"]; ok {
		return errRetiredFields
	}
	if _, ok := raw["approvalPolicy"]; ok {
		return errRetiredFields
	}
	return nil
}

// decodeHeaderCore decodes what every header format requires alike: type
// "session", a non-empty string id, and createdAt and delegationDepth as
// non-negative safe integers.
func decodeHeaderCore(raw map[string]json.RawMessage, h *wire.Header) error {
	var typ string
	if json.Unmarshal(raw["type"], &typ) != nil || typ != "session" {
		return errHeaderShape
	}
	if json.Unmarshal(raw["id"], &h.ID) != nil || h.ID == "" {
		return errHeaderShape
	}
	var err error
	if h.CreatedAt, err = session.ParseSafeInt(raw["createdAt"]); err != nil {
		return errHeaderShape
	}
	if h.DelegationDepth, err = session.ParseSafeInt(raw["delegationDepth"]); err != nil {
		return errHeaderShape
	}
	return nil
}

// finishHeader decodes the optional string fields that every header format
// shares (cwd, parentSession, origin, agentPreset; null is refused) and
// validates the result.
func finishHeader(raw map[string]json.RawMessage, h *wire.Header) error {
	for k, dst := range map[string]*string{"cwd": &h.Cwd, "parentSession": &h.ParentSession, "origin": &h.Origin, "agentPreset": &h.AgentPreset} {
		if v, ok := raw[k]; ok {
			if bytes.Equal(bytes.TrimSpace(v), []byte("null")) || json.Unmarshal(v, dst) != nil {
				return errHeaderShape
			}
		}
	}
	if h.Validate() != nil {
		return errHeaderShape
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// stringifyJSON renders a JSON value as JavaScript's String() would for the
// id of a version error: strings unquoted, other values as written.
func stringifyJSON(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var f float64
	if json.Unmarshal(v, &f) == nil && !math.IsInf(f, 0) {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	if len(v) == 0 {
		return "undefined"
	}
	return strings.TrimSpace(string(v))
}

// headerLine is the header line of FORMAT.md §2.1: its type first, then
// the header's keys in the order of wire.Header's fields.
type headerLine struct {
	Type string `json:"type"`
	wire.Header
}

// encodeHeaderLine renders the header line including its newline.
func encodeHeaderLine(h wire.Header) ([]byte, error) {
	h.Version, h.SeedLength = wire.FormatVersion, 0 // a v3 header stores no seedLength
	return marshalLine(headerLine{Type: "session", Header: h})
}

// encodeBatch renders events as newline-terminated storage lines: one line
// per event, except that runs of assistant/chunk deltas are packed into
// rows (FORMAT.md §1.6).
func encodeBatch(events []session.Event) ([]byte, error) {
	return session.AppendPackedLines(nil, events)
}

func marshalLine(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
