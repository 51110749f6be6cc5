package poppytest

// This file serves the store API's operations (openapi.go has their
// document) over the shop of shop.go. Each request is authenticated with
// Authenticate for the API's resource and, for account operations,
// RequireScopes: the section 6 errors go in WWW-Authenticate. A body that
// breaks the document (wrong media type, not JSON, a field it does not
// list) is the agent's violation: Poppy 0.1 §6: "The Personal Agent calls a
// Company API the way that API's type describes".

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
)

// maxStoreBody bounds a store API request body.
const maxStoreBody = 16 << 10

// Scopes of the store API's account operations (Poppy 0.1 §4.4).
const (
	scopeRead  = "poppy:read"
	scopeWrite = "poppy:write"
)

// installStoreAPI registers the operations of the store API's document on
// the host api.
func (s *storeAPI) installStoreAPI(api string) {
	s.HandleFunc(api, "GET "+storeBase+"/products", s.handleProducts)
	s.HandleFunc(api, "GET "+storeBase+"/orders", s.account(scopeRead, s.handleOrders))
	s.HandleFunc(api, "GET "+storeBase+"/orders/{order_id}", s.account(scopeRead, s.handleOrder))
	s.HandleFunc(api, "POST "+storeBase+"/orders/{order_id}/returns", s.account(scopeWrite, s.handleCreateReturn))
	s.HandleFunc(api, "POST "+storeBase+"/orders/{order_id}/exchanges", s.account(scopeWrite, s.handleCreateExchange))
	s.HandleFunc(api, "GET "+storeBase+"/returns", s.account(scopeRead, s.handleReturns))
	s.HandleFunc(api, "GET "+storeBase+"/exchanges", s.account(scopeRead, s.handleExchanges))
}

// Wire forms of the shop's records, as the document's schemas give them.
type (
	productWire struct {
		SKU   string `json:"sku"`
		Name  string `json:"name"`
		Price int    `json:"price_usd"`
	}
	itemWire struct {
		ID       string `json:"id"`
		Name     string `json:"name"`
		SKU      string `json:"sku"`
		Quantity int    `json:"quantity"`
		Price    int    `json:"price_usd"`
	}
	orderWire struct {
		ID       string     `json:"id"`
		Summary  string     `json:"summary"`
		Status   string     `json:"status"`
		PlacedAt string     `json:"placed_at"`
		Items    []itemWire `json:"items"`
	}
	returnWire struct {
		ID        string `json:"id"`
		OrderID   string `json:"order_id"`
		Reason    string `json:"reason"`
		Status    string `json:"status"`
		CreatedAt string `json:"created_at"`
	}
	exchangeWire struct {
		ID              string `json:"id"`
		OrderID         string `json:"order_id"`
		ItemID          string `json:"item_id"`
		ReplacementSKU  string `json:"replacement_sku"`
		PriceDifference int    `json:"price_difference_usd"`
		Status          string `json:"status"`
		CreatedAt       string `json:"created_at"`
	}
)

func orderOut(o Order) orderWire {
	w := orderWire{ID: o.ID, Summary: o.Summary, Status: o.Status, PlacedAt: o.Placed.Format(time.RFC3339), Items: []itemWire{}}
	for _, it := range o.Items {
		w.Items = append(w.Items, itemWire{it.ID, it.Name, it.SKU, it.Quantity, it.Price})
	}
	return w
}

func returnOut(r Return) returnWire {
	return returnWire{r.ID, r.OrderID, r.Reason, r.Status, r.Created.UTC().Format(time.RFC3339)}
}

func exchangeOut(x Exchange) exchangeWire {
	return exchangeWire{x.ID, x.OrderID, x.ItemID, x.ReplacementSKU, x.PriceDifference, x.Status, x.Created.UTC().Format(time.RFC3339)}
}

// handleProducts lists the catalog: it needs a Session Token (Poppy 0.1
// §4.3: "on every API and conversation request") but no account.
func (s *storeAPI) handleProducts(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.Authenticate(w, r, s.storeResource(hostOnly(r.Host))); !ok {
		return
	}
	query := nameWords(r.URL.Query().Get("q"))
	out := []productWire{}
	for _, p := range s.Products() {
		name := nameWords(p.Name + " " + p.SKU)
		if !slices.ContainsFunc(query, func(w string) bool { return !slices.Contains(name, w) }) {
			out = append(out, productWire{p.SKU, p.Name, p.Price})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"products": out})
}

// nameWords splits s into lower-case words of letters and digits.
func nameWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// account wraps an account operation: the caller must hold scope.
func (s *storeAPI) account(scope string, h func(http.ResponseWriter, *http.Request, *Caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := s.Authenticate(w, r, s.storeResource(hostOnly(r.Host)))
		if !ok || !s.RequireScopes(w, c, scope) {
			return
		}
		h(w, r, c)
	}
}

func (s *storeAPI) handleOrders(w http.ResponseWriter, r *http.Request, c *Caller) {
	status := r.URL.Query().Get("status")
	if status != "" && !slices.Contains([]string{OrderProcessing, OrderShipped, OrderDelivered}, status) {
		writeStoreError(w, http.StatusBadRequest, "invalid_request", "status must be processing, shipped or delivered")
		return
	}
	out := []orderWire{}
	for _, o := range s.Orders(c.Account) {
		if status == "" || o.Status == status {
			out = append(out, orderOut(o))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"orders": out})
}

func (s *storeAPI) handleOrder(w http.ResponseWriter, r *http.Request, c *Caller) {
	o, ok := s.Order(c.Account, r.PathValue("order_id"))
	if !ok {
		writeShopError(w, ErrNoSuchOrder)
		return
	}
	writeJSON(w, http.StatusOK, orderOut(o))
}

func (s *storeAPI) handleCreateReturn(w http.ResponseWriter, r *http.Request, c *Caller) {
	var in struct {
		Reason *string `json:"reason"`
	}
	if !s.readStoreBody(w, r, &in, "reason") {
		return
	}
	if in.Reason == nil || strings.TrimSpace(*in.Reason) == "" {
		writeStoreError(w, http.StatusBadRequest, "invalid_request", "reason is required")
		return
	}
	ret, err := s.CreateReturn(c.Account, r.PathValue("order_id"), *in.Reason)
	if err != nil {
		writeShopError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, returnOut(ret))
}

func (s *storeAPI) handleCreateExchange(w http.ResponseWriter, r *http.Request, c *Caller) {
	var in struct {
		OrderID        *string `json:"order_id"`
		ItemID         *string `json:"item_id"`
		ReplacementSKU *string `json:"replacement_sku"`
	}
	if !s.readStoreBody(w, r, &in, "order_id", "item_id", "replacement_sku") {
		return
	}
	if in.OrderID == nil || in.ItemID == nil || in.ReplacementSKU == nil {
		writeStoreError(w, http.StatusBadRequest, "invalid_request", "order_id, item_id and replacement_sku are required")
		return
	}
	if path := r.PathValue("order_id"); *in.OrderID != path {
		writeStoreError(w, http.StatusBadRequest, "order_mismatch", "the body's order_id is not the path's "+path)
		return
	}
	x, err := s.CreateExchange(c.Account, *in.OrderID, *in.ItemID, *in.ReplacementSKU)
	if err != nil {
		writeShopError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, exchangeOut(x))
}

func (s *storeAPI) handleReturns(w http.ResponseWriter, _ *http.Request, c *Caller) {
	out := []returnWire{}
	for _, r := range s.Returns(c.Account) {
		out = append(out, returnOut(r))
	}
	writeJSON(w, http.StatusOK, map[string]any{"returns": out})
}

func (s *storeAPI) handleExchanges(w http.ResponseWriter, _ *http.Request, c *Caller) {
	out := []exchangeWire{}
	for _, x := range s.Exchanges(c.Account) {
		out = append(out, exchangeOut(x))
	}
	writeJSON(w, http.StatusOK, map[string]any{"exchanges": out})
}

// readStoreBody decodes a JSON object body whose only members may be
// fields into v. A body that breaks the document is the agent's violation;
// a value of the wrong type is the model's mistake, answered without one.
// On failure it writes the answer and returns false.
func (s *storeAPI) readStoreBody(w http.ResponseWriter, r *http.Request, v any, fields ...string) bool {
	bug := func(format string, args ...any) bool {
		s.violate(r, "6", "", "%s %s%s: "+format, append([]any{r.Method, hostOnly(r.Host), r.URL.Path}, args...)...)
		writeStoreError(w, http.StatusBadRequest, "invalid_request", "the body does not follow the API's document")
		return false
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return bug("Content-Type %q, the document says application/json", r.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxStoreBody+1))
	if err != nil || len(body) > maxStoreBody {
		writeStoreError(w, http.StatusRequestEntityTooLarge, "invalid_request", "the body is unreadable or too large")
		return false
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil || members == nil {
		return bug("the body is not a JSON object")
	}
	for name := range members {
		if !slices.Contains(fields, name) {
			return bug("the body has the member %q, which the document does not list", name)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		writeStoreError(w, http.StatusBadRequest, "invalid_request", "a member of the body has the wrong type")
		return false
	}
	return true
}

// writeStoreError writes a problem answer of the store API.
func writeStoreError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

// shopErrors gives each shop error its answer.
var shopErrors = []struct {
	err    error
	status int
	code   string
}{
	{ErrNoSuchOrder, http.StatusNotFound, "order_not_found"},
	{ErrNoSuchItem, http.StatusUnprocessableEntity, "item_not_found"},
	{ErrUnknownSKU, http.StatusUnprocessableEntity, "unknown_sku"},
	{ErrNotDelivered, http.StatusUnprocessableEntity, "not_delivered"},
	{ErrAlreadyReturned, http.StatusConflict, "already_returned"},
	{ErrAlreadyExchanged, http.StatusConflict, "already_exchanged"},
}

// writeShopError answers an error of the shop's methods.
func writeShopError(w http.ResponseWriter, err error) {
	for _, e := range shopErrors {
		if errors.Is(err, e.err) {
			writeStoreError(w, e.status, e.code, strings.TrimPrefix(err.Error(), "poppytest: "))
			return
		}
	}
	writeStoreError(w, http.StatusInternalServerError, "server_error", "the shop failed")
}
