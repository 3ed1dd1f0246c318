package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
)

// errNoRule is the class of a call from which --always (or the chat's
// [a]lways) cannot derive an allow rule.
var errNoRule = errors.New("no allow rule can be derived from the call")

// deriveRule returns the allow rule that lets calls like a's run without
// asking: for run_command, the commands starting with its command's first
// word and, when it is not a flag, its second ("go test"); for
// write_file, the paths under its path's directory ("." for the cwd); for
// any other tool, every call of it.
func deriveRule(a wire.PendingApproval) (wire.ApprovalRule, error) {
	switch a.Tool {
	case tool.RunCommandName:
		var args struct {
			Command *string `json:"command"`
		}
		if err := json.Unmarshal([]byte(a.Arguments), &args); err != nil || args.Command == nil {
			return wire.ApprovalRule{}, fmt.Errorf("%w: its arguments hold no command%s", errNoRule, cutNote(a))
		}
		prefix, err := commandPrefix(*args.Command)
		if err != nil {
			return wire.ApprovalRule{}, err
		}
		return checked(wire.ApprovalRule{Tool: a.Tool, CommandPrefix: prefix})
	case tool.WriteFileName:
		var args struct {
			Path *string `json:"path"`
		}
		if err := json.Unmarshal([]byte(a.Arguments), &args); err != nil || args.Path == nil || *args.Path == "" {
			return wire.ApprovalRule{}, fmt.Errorf("%w: its arguments hold no path%s", errNoRule, cutNote(a))
		}
		dir, err := pathDir(*args.Path)
		if err != nil {
			return wire.ApprovalRule{}, err
		}
		return checked(wire.ApprovalRule{Tool: a.Tool, PathPrefix: dir})
	}
	if a.Tool == "" {
		return wire.ApprovalRule{}, fmt.Errorf("%w: it names no tool", errNoRule)
	}
	return checked(wire.ApprovalRule{Tool: a.Tool})
}

// checked is r when the session would take it (wire.ApprovalRule.Validate).
func checked(r wire.ApprovalRule) (wire.ApprovalRule, error) {
	if err := r.Validate(); err != nil {
		return wire.ApprovalRule{}, fmt.Errorf("%w: %w", errNoRule, err)
	}
	return r, nil
}

// cutNote says that arguments were cut, when they were.
func cutNote(a wire.PendingApproval) string {
	if a.Truncated {
		return " (they were cut)"
	}
	return ""
}

// commandPrefix is the first word of command and its second when that is
// not a flag, both plain words.
func commandPrefix(command string) (string, error) {
	words := strings.Fields(command)
	if len(words) == 0 || !plainWord(words[0]) {
		return "", fmt.Errorf("%w: the command %q does not start with a plain word", errNoRule, command)
	}
	if len(words) > 1 && !strings.HasPrefix(words[1], "-") && plainWord(words[1]) {
		return words[0] + " " + words[1], nil
	}
	return words[0], nil
}

// plainWord reports whether w holds no shell syntax (wire.ShellSyntax).
func plainWord(w string) bool {
	return w != "" && !strings.ContainsAny(w, wire.ShellSyntax)
}

// pathDir is the directory of a path relative to the cwd, "." for the cwd
// itself; an absolute path or one leaving the cwd has none.
func pathDir(p string) (string, error) {
	rel, err := relativePath(p)
	if err != nil {
		return "", err
	}
	return path.Dir(rel), nil
}

// relativePath cleans p, a path relative to the cwd that stays inside it.
func relativePath(p string) (string, error) {
	if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%w: the path %q is absolute; allow a directory relative to the working directory instead", errNoRule, p)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%w: the path %q leaves the working directory", errNoRule, p)
	}
	return c, nil
}

// ruleText renders an allow rule for the terminal, on one line.
func ruleText(r wire.ApprovalRule) string {
	switch {
	case r.CommandPrefix != "":
		return fmt.Sprintf("%s: commands starting %s", displayText(r.Tool), termText(fmt.Sprintf("%q", r.CommandPrefix), false))
	case r.PathPrefix != "":
		return fmt.Sprintf("%s: paths under %s", displayText(r.Tool), displayText(r.PathPrefix))
	}
	return displayText(r.Tool) + ": every call"
}

// checkApprovalPolicy refuses a --approval-policy value that is neither
// ask nor never ("" is none).
func checkApprovalPolicy(p string) error {
	if p != "" && !slices.Contains(wire.ApprovalPolicies, p) {
		return usageErrorf("--approval-policy must be %q or %q, got %q", wire.ApprovalAsk, wire.ApprovalNever, p)
	}
	return nil
}

// checkApprovalTimeout refuses a --approval-timeout that is negative or
// not a whole number of milliseconds above zero (zero only when it clears
// the timeout).
func checkApprovalTimeout(d time.Duration, zeroClears bool) error {
	switch {
	case d < 0:
		return usageErrorf("--approval-timeout must not be negative, got %s", d)
	case d == 0 && !zeroClears:
		return usageErrorf("--approval-timeout must be positive")
	case d > 0 && d < time.Millisecond:
		return usageErrorf("--approval-timeout must be at least 1ms, got %s", d)
	}
	return nil
}

// commandRule is the rule of --allow-command.
func commandRule(prefix string) (wire.ApprovalRule, error) {
	r := wire.ApprovalRule{Tool: tool.RunCommandName, CommandPrefix: strings.Join(strings.Fields(prefix), " ")}
	if r.CommandPrefix == "" || strings.ContainsAny(prefix, wire.ShellSyntax) || r.Validate() != nil {
		return wire.ApprovalRule{}, usageErrorf("--allow-command %q: a command prefix is one or more plain words (no shell syntax)", prefix)
	}
	return r, nil
}

// pathRule is the rule of --allow-path.
func pathRule(p string) (wire.ApprovalRule, error) {
	rel, err := relativePath(p)
	r := wire.ApprovalRule{Tool: tool.WriteFileName, PathPrefix: rel}
	if err != nil || p == "" || r.Validate() != nil {
		return wire.ApprovalRule{}, usageErrorf("--allow-path %q: a path prefix is a path relative to the working directory, inside it", p)
	}
	return r, nil
}
