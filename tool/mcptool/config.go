package mcptool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
)

// ErrInvalidConfig marks a configuration that cannot be used; the wrapping
// error says which server and field.
var ErrInvalidConfig = errors.New("mcptool: invalid configuration")

// Transport types a ServerConfig may name in Type.
const (
	TypeStdio = "stdio"
	TypeHTTP  = "http"
)

// serverNamePattern is the rule for server names: they become the prefix of
// tool names.
var serverNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,40}$`)

// Config is the set of MCP servers a worker connects to, by name.
//
// Its JSON form is {"servers": {NAME: SERVER, ...}}; the key "mcpServers"
// (the shape other agent tools use) is accepted in place of "servers".
type Config struct {
	// Servers maps a server's name to its configuration. A name is 1 to 40
	// letters, digits, '_' or '-'; it prefixes the server's tool names.
	Servers map[string]ServerConfig `json:"servers"`
}

// ServerConfig configures one server: either a stdio command (Command, with
// Args, Env and Dir) or a streamable HTTP endpoint (URL, with Headers).
type ServerConfig struct {
	// Type is "stdio" or "http" ("streamable-http" and "streamableHttp" are
	// read as "http"); empty means stdio when Command is set, http when URL
	// is set. The legacy "sse" transport is refused.
	Type string `json:"type,omitempty"`
	// Command is the program of a stdio server, looked up in PATH.
	Command string `json:"command,omitempty"`
	// Args are its arguments.
	Args []string `json:"args,omitempty"`
	// Env holds variables added to the worker's environment for it.
	Env map[string]string `json:"env,omitempty"`
	// Dir is its working directory (the worker's when empty).
	Dir string `json:"cwd,omitempty"`
	// URL is the endpoint of a streamable HTTP server (http or https).
	URL string `json:"url,omitempty"`
	// Headers are sent with every HTTP request, e.g. Authorization.
	Headers map[string]string `json:"headers,omitempty"`
	// Disabled leaves the server out.
	Disabled bool `json:"disabled,omitempty"`
	// IgnoreAnnotations makes every tool of the server exclusive and
	// non-idempotent, whatever its annotations claim.
	IgnoreAnnotations bool `json:"ignoreAnnotations,omitempty"`
	// RequireApproval makes every tool of the server wait for the user's
	// approval in a session whose approval policy is ask (tool.Tool.Approval;
	// docs/API.md "Approvals").
	RequireApproval bool `json:"requireApproval,omitempty"`
}

// LoadConfig reads and checks the configuration file at path.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("mcptool: reading configuration: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes and checks a JSON configuration. Unknown fields, a
// server with both or neither of command and url, fields of the other
// transport, a bad name or URL are refused with an error wrapping
// ErrInvalidConfig.
func ParseConfig(data []byte) (Config, error) {
	var raw struct {
		Servers    map[string]ServerConfig `json:"servers"`
		MCPServers map[string]ServerConfig `json:"mcpServers"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("%w: data after the configuration object", ErrInvalidConfig)
	}
	if raw.Servers != nil && raw.MCPServers != nil {
		return Config{}, fmt.Errorf(`%w: both "servers" and "mcpServers" are set; use one`, ErrInvalidConfig)
	}
	cfg := Config{Servers: raw.Servers}
	if cfg.Servers == nil {
		cfg.Servers = raw.MCPServers
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate checks every server of c; the error wraps ErrInvalidConfig.
func (c Config) Validate() error {
	var errs []error
	for _, name := range c.names(true) {
		if err := c.Servers[name].validate(name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// names returns the server names, sorted; disabled servers only when all.
func (c Config) names(all bool) []string {
	var names []string
	for name, s := range c.Servers {
		if all || !s.Disabled {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// transport returns the server's normalized transport type.
func (s ServerConfig) transport() string {
	switch s.Type {
	case "http", "streamable-http", "streamableHttp":
		return TypeHTTP
	case "":
		if s.Command == "" && s.URL != "" {
			return TypeHTTP
		}
		return TypeStdio
	}
	return s.Type
}

func (s ServerConfig) validate(name string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: server %q: %s", ErrInvalidConfig, name, fmt.Sprintf(format, args...))
	}
	if !serverNamePattern.MatchString(name) {
		return bad("the name must be 1 to 40 letters, digits, '_' or '-'")
	}
	switch s.Type {
	case "", TypeStdio, TypeHTTP, "streamable-http", "streamableHttp":
	case "sse":
		return bad(`the legacy "sse" transport is not supported; use a streamable HTTP endpoint ("type": "http")`)
	default:
		return bad(`unknown type %q; want "stdio" or "http"`, s.Type)
	}
	if s.Command != "" && s.URL != "" {
		return bad(`both "command" and "url" are set; a server is one or the other`)
	}
	switch s.transport() {
	case TypeStdio:
		if strings.TrimSpace(s.Command) == "" {
			return bad(`a stdio server needs "command"`)
		}
		if len(s.Headers) > 0 {
			return bad(`"headers" apply to an HTTP server only`)
		}
	case TypeHTTP:
		if s.URL == "" {
			return bad(`an HTTP server needs "url"`)
		}
		if len(s.Args) > 0 || len(s.Env) > 0 || s.Dir != "" {
			return bad(`"args", "env" and "cwd" apply to a stdio server only`)
		}
		u, err := url.Parse(s.URL)
		if err != nil {
			return bad("url: %v", err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("url %q: want an absolute http or https URL", s.URL)
		}
	}
	return nil
}
