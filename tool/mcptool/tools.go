package mcptool

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sessionflow/sessionflow/tool"
)

// Separator joins a server's name and its tool's name in a registered name.
const Separator = "__"

// registeredNamePattern is the registry's tool-name rule.
var registeredNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ToolName returns the name under which the tool remote of server is
// registered: server + "__" + remote, each character of remote outside
// [a-zA-Z0-9_-] replaced by '_'. It fails (ErrInvalidName) when the result
// is longer than 64 characters or remote is empty.
func ToolName(server, remote string) (string, error) {
	var b strings.Builder
	b.WriteString(server)
	b.WriteString(Separator)
	for _, r := range remote {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if remote == "" || !registeredNamePattern.MatchString(name) {
		return "", fmt.Errorf("%w: tool %q of server %q would be registered as %q; a name has 1 to 64 letters, digits, '_' or '-' (shorten the server's name)",
			ErrInvalidName, remote, server, name)
	}
	return name, nil
}

// Classes returns the Parallel and Idempotent classes of a tool with the
// given annotations (nil: none): readOnlyHint makes a tool parallel-safe and
// idempotent; idempotentHint alone makes it idempotent (and exclusive);
// destructiveHint and openWorldHint do not change either class.
func Classes(a *mcp.ToolAnnotations) (parallel, idempotent bool) {
	if a == nil {
		return false, false
	}
	if a.ReadOnlyHint {
		return true, true
	}
	return false, a.IdempotentHint
}

// toolFor turns one of the server's tools into a tool.Tool.
func (s *server) toolFor(mt *mcp.Tool) (tool.Tool, error) {
	name, err := ToolName(s.name, mt.Name)
	if err != nil {
		return tool.Tool{}, err
	}
	schema, err := json.Marshal(mt.InputSchema)
	if err != nil {
		return tool.Tool{}, fmt.Errorf("%w %q: tool %q: input schema: %w", ErrStart, s.name, mt.Name, err)
	}
	desc := mt.Description
	if desc == "" {
		desc = mt.Title
	}
	if desc == "" && mt.Annotations != nil {
		desc = mt.Annotations.Title
	}
	var parallel, idempotent bool
	if !s.cfg.IgnoreAnnotations {
		parallel, idempotent = Classes(mt.Annotations)
	}
	remote := mt.Name
	return tool.Tool{
		Name:        name,
		Description: desc,
		Schema:      schema,
		Parallel:    parallel,
		Idempotent:  idempotent,
		Approval:    s.cfg.RequireApproval,
		Run: func(ctx context.Context, call tool.Call) (tool.Result, error) {
			return s.call(ctx, remote, call)
		},
	}, nil
}
