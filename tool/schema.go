package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// schemaURL is the location a tool's schema is compiled under; it never
// names a file, so nothing is read from disk.
const schemaURL = "urn:sessionflow:tool-schema"

// noLoader refuses every external $ref: a tool schema must be
// self-contained, and compiling one must never read a file or the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %q not allowed: a tool schema must be self-contained", url)
}

var printer = message.NewPrinter(language.English)

// compileSchema checks that raw is a JSON Schema (draft 2020-12 unless it
// names another draft through $schema) whose root is of type object, and
// compiles it.
func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, fmt.Errorf("%w: no schema (use {\"type\":\"object\"} for a tool without arguments)", ErrInvalidSchema)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: not JSON: %w", ErrInvalidSchema, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: the schema must be a JSON object, got %s", ErrInvalidSchema, jsonKind(doc))
	}
	if t, _ := obj["type"].(string); t != "object" {
		return nil, fmt.Errorf("%w: the root must have \"type\": \"object\" (the arguments are an object), got %s", ErrInvalidSchema, compactJSON(obj["type"]))
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSchema, err)
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidSchema, describeSchemaError(err))
	}
	return s, nil
}

// describeSchemaError renders a compile error; a schema that fails its
// meta-schema is described by its failing keywords.
func describeSchemaError(err error) string {
	var se *jsonschema.SchemaValidationError
	if errors.As(err, &se) {
		var ve *jsonschema.ValidationError
		if errors.As(se.Err, &ve) {
			return strings.Join(leafTexts(ve, "schema"), "; ")
		}
	}
	return err.Error()
}

// validationText renders a failed validation of arguments: one line per
// failing value, naming the property and why, in a stable order.
func validationText(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	return strings.Join(leafTexts(ve, "arguments"), "\n")
}

// leafTexts lists the innermost causes of a validation error as
// "property \"a/b\": why" (or "<whole>: why" at the root), sorted and
// deduplicated.
func leafTexts(ve *jsonschema.ValidationError, whole string) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		where := whole
		if len(e.InstanceLocation) > 0 {
			where = fmt.Sprintf("property %q", strings.Join(e.InstanceLocation, "/"))
		}
		line := where + ": " + kindText(e.ErrorKind)
		if !seen[line] {
			seen[line] = true
			out = append(out, line)
		}
	}
	walk(ve)
	sort.Strings(out)
	return out
}

// kindText describes one failed keyword. Numeric bounds are written
// exactly (the library's printer writes large numbers as 1×10⁹).
func kindText(k jsonschema.ErrorKind) string {
	bound := func(kw string, got, want *big.Rat) string {
		return fmt.Sprintf("%s: got %s, want %s", kw, ratText(got), ratText(want))
	}
	switch k := k.(type) {
	case *kind.Minimum:
		return bound("minimum", k.Got, k.Want)
	case *kind.Maximum:
		return bound("maximum", k.Got, k.Want)
	case *kind.ExclusiveMinimum:
		return bound("exclusiveMinimum", k.Got, k.Want)
	case *kind.ExclusiveMaximum:
		return bound("exclusiveMaximum", k.Got, k.Want)
	case *kind.MultipleOf:
		return bound("multipleOf", k.Got, k.Want)
	}
	return k.LocalizedString(printer)
}

// ratText writes r as an integer or a decimal (up to 9 places).
func ratText(r *big.Rat) string {
	if r.IsInt() {
		return r.RatString()
	}
	t := strings.TrimRight(r.FloatString(9), "0")
	return strings.TrimSuffix(t, ".")
}

// jsonKind names the JSON type of a value decoded by jsonschema.UnmarshalJSON.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// compactJSON renders a decoded value for a message; a missing value is
// "nothing".
func compactJSON(v any) string {
	if v == nil {
		return "nothing"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
