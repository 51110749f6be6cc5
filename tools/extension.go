package tools

import (
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/conversation"
	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// requiredExtension returns the extension a Company said it requires for a
// request, when err is its extension_required answer. Poppy 0.1 §3.3: "It
// returns extension_required (HTTP 403) with the extension's name in
// extension."
func requiredExtension(err error) (string, bool) {
	var ae *auth.Error
	if errors.As(err, &ae) && ae.Is(auth.ErrExtensionRequired) {
		return ae.Extension, true
	}
	var ce *conversation.Error
	if errors.As(err, &ce) && ce.Is(conversation.ErrExtensionRequired) {
		return ce.Extension, true
	}
	return "", false
}

// extensionFailure says that poppy-mcp cannot do what the model asked for
// (what: "operation listOrders") because the Company requires an extension
// poppy-mcp does not support, so trying again cannot help, and names what
// else may (instead). fields go into the structured result.
func extensionFailure(domain, ext, what, instead string, fields map[string]string) *mcp.CallToolResult {
	name, text := extensionText(domain, ext, what, instead)
	out := map[string]string{"error": "extension_required", "extension": name, "next": instead}
	for k, v := range fields {
		out[k] = v
	}
	return failure(out, "%s", text)
}

// extensionText is extensionFailure's text, with the extension's name
// cleaned: it is the Company's text.
func extensionText(domain, ext, what, instead string) (name, text string) {
	name = untrusted.Text(ext, 120)
	named := "the extension " + untrusted.Quote(name, 120)
	if name == "" {
		named = "an extension it did not name"
	}
	return name, fmt.Sprintf("%s requires %s for %s, and poppy-mcp does not support that extension, so poppy-mcp cannot do this: "+
		"trying again will not help. %s", domain, named, what, instead)
}

// What else may do what an extension blocks, by where it was blocked.
const (
	insteadOfAPI = "The Company's own agent may do it for the user: ask it with send_message (domain %[1]s). " +
		"Or the user can do it on the Company's website (open_website with domain %[1]s)."
	insteadOfConversation = "The user can do it on the Company's website (open_website with domain %[1]s), or through " +
		"the Company's APIs if they offer it (list_api_operations with domain %[1]s)."
	insteadOfSession = "Without a Session none of poppy-mcp's tools can work with %[1]s: tell the user, who can still use " +
		"the Company's website or app directly."
)
