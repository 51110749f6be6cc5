package poppytest

// This file holds the store behind the Company: each account's orders, and
// the returns and exchanges made on them. Every capability that shows or
// changes the shop (the Company Agent, the OpenAPI store API, the website)
// goes through the methods here, so they all agree.
//
// The fixture, per account:
//
//	acct_dana  ord_1042  "Stormline jacket, size M"  delivered  item itm_4Qa  sku stormline-m
//	acct_dana  ord_1043  "Trail socks"               shipped    item itm_7Kb  sku trail-socks-m
//	acct_sam   ord_2001  "Rain hat"                  delivered  item itm_2Rh  sku rain-hat-os
//
// Orders can be returned or exchanged once they are delivered, once each.
// An exchange names a SKU of the catalog below other than the item's own.

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Order statuses.
const (
	OrderProcessing = "processing"
	OrderShipped    = "shipped"
	OrderDelivered  = "delivered"
)

// Order is one order of an account.
type Order struct {
	ID      string
	Account string
	Summary string // such as "Stormline jacket, size M"
	Status  string // OrderProcessing, OrderShipped or OrderDelivered
	Placed  time.Time
	Items   []Item
}

// Item is one line of an order.
type Item struct {
	ID       string
	Name     string
	SKU      string
	Quantity int
	Price    int // in whole dollars
}

// Return is a return of an order.
type Return struct {
	ID      string
	Account string
	OrderID string
	Reason  string
	Status  string // "requested"
	Created time.Time
}

// Exchange is an exchange of one item of an order for another SKU.
type Exchange struct {
	ID              string
	Account         string
	OrderID         string
	ItemID          string
	ReplacementSKU  string
	PriceDifference int    // in whole dollars; negative when the replacement costs less
	Status          string // "requested"
	Created         time.Time
}

// Product is one SKU of the catalog.
type Product struct {
	SKU   string
	Name  string
	Price int // in whole dollars
}

// Errors of the shop methods. Test them with errors.Is.
var (
	ErrNoSuchOrder      = errors.New("poppytest: no such order")
	ErrNoSuchItem       = errors.New("poppytest: no such item in the order")
	ErrUnknownSKU       = errors.New("poppytest: unknown SKU")
	ErrNotDelivered     = errors.New("poppytest: the order has not been delivered")
	ErrAlreadyReturned  = errors.New("poppytest: the order already has a return")
	ErrAlreadyExchanged = errors.New("poppytest: the item already has an exchange")
)

// catalog is every SKU the shop sells.
var catalog = []Product{
	{"stormline-s", "Stormline jacket, size S", 180},
	{"stormline-m", "Stormline jacket, size M", 180},
	{"stormline-l", "Stormline jacket, size L", 180},
	{"stormline-insulated-m", "Stormline insulated jacket, size M", 250},
	{"stormline-insulated-l", "Stormline insulated jacket, size L", 250},
	{"trail-socks-m", "Trail socks, size M", 18},
	{"trail-socks-l", "Trail socks, size L", 18},
	{"rain-hat-os", "Rain hat, one size", 35},
}

// shop is the Server's concern of the store: its catalog, orders, returns
// and exchanges, which the store API, the Company Agent and the MCP tools
// act on. Its methods are safe for concurrent use.
type shop struct {
	*Server
	// mu guards every field below. In shop's methods, s.mu is this lock.
	mu        sync.Mutex
	orders    map[string][]Order // account -> orders, in fixture order
	returns   []Return
	exchanges []Exchange
}

// newShop returns the fixture, with orders placed relative to now.
func newShop(s *Server, now time.Time) *shop {
	day := 24 * time.Hour
	return &shop{Server: s, orders: map[string][]Order{
		"acct_dana": {
			{ID: "ord_1042", Account: "acct_dana", Summary: "Stormline jacket, size M", Status: OrderDelivered,
				Placed: now.Add(-10 * day).UTC().Truncate(time.Second),
				Items:  []Item{{ID: "itm_4Qa", Name: "Stormline jacket, size M", SKU: "stormline-m", Quantity: 1, Price: 180}}},
			{ID: "ord_1043", Account: "acct_dana", Summary: "Trail socks", Status: OrderShipped,
				Placed: now.Add(-2 * day).UTC().Truncate(time.Second),
				Items:  []Item{{ID: "itm_7Kb", Name: "Trail socks, size M", SKU: "trail-socks-m", Quantity: 2, Price: 18}}},
		},
		"acct_sam": {
			{ID: "ord_2001", Account: "acct_sam", Summary: "Rain hat", Status: OrderDelivered,
				Placed: now.Add(-6 * day).UTC().Truncate(time.Second),
				Items:  []Item{{ID: "itm_2Rh", Name: "Rain hat, one size", SKU: "rain-hat-os", Quantity: 1, Price: 35}}},
		},
	}}
}

// clone is a deep copy of o.
func (o Order) clone() Order {
	o.Items = slices.Clone(o.Items)
	return o
}

// Products returns the catalog.
func (s *shop) Products() []Product { return slices.Clone(catalog) }

// Orders returns copies of the orders of account, oldest first.
func (s *shop) Orders(account string) []Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Order
	for _, o := range s.orders[account] {
		out = append(out, o.clone())
	}
	return out
}

// AddOrder adds o to the orders of o.Account, after its others, for a
// test whose accounts are not the fixture's (a load test's many people,
// each with an order of their own). The store API, the Company Agent and
// the website show it as they show the fixture's. It fails with
// ErrUnknownSKU for an item not in the catalog.
func (s *shop) AddOrder(o Order) error {
	for _, it := range o.Items {
		if _, ok := product(it.SKU); !ok {
			return fmt.Errorf("%w: %s", ErrUnknownSKU, it.SKU)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.orders[o.Account] = append(s.orders[o.Account], o.clone())
	return nil
}

// Order returns a copy of the order id of account. Another account's order
// is not found.
func (s *shop) Order(account, id string) (Order, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.order(account, id)
	if o == nil {
		return Order{}, false
	}
	return o.clone(), true
}

// order returns the live order; the caller holds mu.
func (sh *shop) order(account, id string) *Order {
	for i := range sh.orders[account] {
		if sh.orders[account][i].ID == id {
			return &sh.orders[account][i]
		}
	}
	return nil
}

// CreateReturn starts a return of a delivered order of account. It fails
// with ErrNoSuchOrder, ErrNotDelivered or ErrAlreadyReturned.
func (s *shop) CreateReturn(account, orderID, reason string) (Return, error) {
	now := s.timeNow()
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.order(account, orderID)
	switch {
	case o == nil:
		return Return{}, fmt.Errorf("%w: %s", ErrNoSuchOrder, orderID)
	case o.Status != OrderDelivered:
		return Return{}, fmt.Errorf("%w: %s is %s", ErrNotDelivered, orderID, o.Status)
	}
	for _, r := range s.returns {
		if r.Account == account && r.OrderID == orderID {
			return Return{}, fmt.Errorf("%w: %s has %s", ErrAlreadyReturned, orderID, r.ID)
		}
	}
	r := Return{ID: "ret_" + randomString(6), Account: account, OrderID: orderID, Reason: reason,
		Status: "requested", Created: now}
	s.returns = append(s.returns, r)
	return r, nil
}

// CreateExchange starts an exchange of item itemID of a delivered order of
// account for sku. It fails with ErrNoSuchOrder, ErrNoSuchItem,
// ErrUnknownSKU (also for the item's own SKU), ErrNotDelivered or
// ErrAlreadyExchanged.
func (s *shop) CreateExchange(account, orderID, itemID, sku string) (Exchange, error) {
	now := s.timeNow()
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.order(account, orderID)
	if o == nil {
		return Exchange{}, fmt.Errorf("%w: %s", ErrNoSuchOrder, orderID)
	}
	i := slices.IndexFunc(o.Items, func(it Item) bool { return it.ID == itemID })
	if i < 0 {
		return Exchange{}, fmt.Errorf("%w: %s has no item %s", ErrNoSuchItem, orderID, itemID)
	}
	p, ok := product(sku)
	switch {
	case !ok || sku == o.Items[i].SKU:
		return Exchange{}, fmt.Errorf("%w: %q", ErrUnknownSKU, sku)
	case o.Status != OrderDelivered:
		return Exchange{}, fmt.Errorf("%w: %s is %s", ErrNotDelivered, orderID, o.Status)
	}
	for _, x := range s.exchanges {
		if x.Account == account && x.OrderID == orderID && x.ItemID == itemID {
			return Exchange{}, fmt.Errorf("%w: %s has %s", ErrAlreadyExchanged, itemID, x.ID)
		}
	}
	x := Exchange{ID: "exc_" + randomString(6), Account: account, OrderID: orderID, ItemID: itemID,
		ReplacementSKU: sku, PriceDifference: p.Price - o.Items[i].Price, Status: "requested", Created: now}
	s.exchanges = append(s.exchanges, x)
	return x, nil
}

// product looks a SKU up in the catalog.
func product(sku string) (Product, bool) {
	i := slices.IndexFunc(catalog, func(p Product) bool { return p.SKU == sku })
	if i < 0 {
		return Product{}, false
	}
	return catalog[i], true
}

// Returns returns the returns of account, oldest first.
func (s *shop) Returns(account string) []Return {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(s.returns), func(r Return) bool { return r.Account != account })
}

// Exchanges returns the exchanges of account, oldest first.
func (s *shop) Exchanges(account string) []Exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(s.exchanges), func(x Exchange) bool { return x.Account != account })
}
