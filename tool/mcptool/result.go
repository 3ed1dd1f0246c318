package mcptool

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/tool"
)

// Meta is the Meta payload of a result from an MCP tool.
type Meta struct {
	// Server is the configured server's name.
	Server string `json:"mcpServer"`
	// Tool is the tool's name on that server.
	Tool string `json:"mcpTool"`
	// Truncated marks a result whose text was cut at Options.MaxResultBytes.
	Truncated bool `json:"truncated,omitempty"`
}

// result maps a CallToolResult to a tool.Result.
func (s *server) result(remote string, res *mcp.CallToolResult) tool.Result {
	texts := make([]string, 0, len(res.Content))
	for _, c := range res.Content {
		texts = append(texts, contentText(c))
	}
	if len(texts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			texts = append(texts, string(b))
		}
	}
	texts, truncated := capTexts(texts, s.opts.MaxResultBytes)
	out := tool.Result{Content: make([]provider.Block, 0, len(texts))}
	for _, t := range texts {
		out.Content = append(out.Content, provider.Block{Type: provider.BlockText, Text: t})
	}
	if res.IsError {
		out.IsError = true
		out.Error = &tool.ErrorInfo{Name: tool.NameFailed, Code: tool.CodeFailed}
	}
	meta, err := json.Marshal(Meta{Server: s.name, Tool: remote, Truncated: truncated})
	if err == nil {
		out.Meta = meta
	}
	return out
}

// contentText renders one content item as text: text as is, an embedded
// text resource as its text, anything else as a short description.
func contentText(c mcp.Content) string {
	switch c := c.(type) {
	case *mcp.TextContent:
		return c.Text
	case *mcp.ImageContent:
		return fmt.Sprintf("[image: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data))
	case *mcp.AudioContent:
		return fmt.Sprintf("[audio: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data))
	case *mcp.ResourceLink:
		text := fmt.Sprintf("[resource link: %s", c.URI)
		if c.Name != "" {
			text += ", " + c.Name
		}
		if c.MIMEType != "" {
			text += ", " + c.MIMEType
		}
		if c.Description != "" {
			text += ": " + c.Description
		}
		return text + "]"
	case *mcp.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return "[resource]"
		}
		if r.Blob == nil {
			return fmt.Sprintf("[resource: %s, %s]\n%s", r.URI, orUnknown(r.MIMEType), r.Text)
		}
		return fmt.Sprintf("[resource: %s, %s, %d bytes]", r.URI, orUnknown(r.MIMEType), len(r.Blob))
	}
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Sprintf("[content of type %T]", c)
	}
	return fmt.Sprintf("[content: %s]", b)
}

func orUnknown(mime string) string {
	if mime == "" {
		return "unknown type"
	}
	return mime
}

// capTexts keeps the first limit bytes of texts (cut at a rune boundary)
// and appends a note when it cut anything.
func capTexts(texts []string, limit int) ([]string, bool) {
	total := 0
	for _, t := range texts {
		total += len(t)
	}
	if total <= limit {
		return texts, false
	}
	out := make([]string, 0, len(texts)+1)
	shown := 0
	for _, t := range texts {
		left := limit - shown
		if len(t) > left {
			cut := left
			for cut > 0 && !utf8.RuneStart(t[cut]) {
				cut--
			}
			if cut > 0 {
				out = append(out, t[:cut])
				shown += cut
			}
			break
		}
		out = append(out, t)
		shown += len(t)
	}
	out = append(out, fmt.Sprintf("[output truncated: %d bytes in all, the first %d shown]", total, shown))
	return out, true
}
