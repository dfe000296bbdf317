package quota

import (
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"strings"
)

// Entity types and quota keys, as Apache names them.
const (
	TypeUser     = "user"
	TypeClientID = "client-id"
	TypeIP       = "ip"

	ProducerByteRate       = "producer_byte_rate"
	ConsumerByteRate       = "consumer_byte_rate"
	RequestPercentage      = "request_percentage"
	ControllerMutationRate = "controller_mutation_rate"
	ConnectionCreationRate = "connection_creation_rate"
)

// Name is one component of an entity: absent, the <default> entity of its
// type, or a named one.
type Name struct {
	Present bool
	Default bool
	Value   string
}

// Named is a component naming value.
func Named(value string) Name { return Name{Present: true, Value: value} }

// DefaultName is a type's <default> component.
var DefaultName = Name{Present: true, Default: true}

// Entity is a quota entity: a user, a client id, both, or an IP, each
// named or the default.
type Entity struct {
	User     Name
	ClientID Name
	IP       Name
}

// Component is one (type, name) pair of an entity in the wire's form
// (a nil name is the default).
type Component struct {
	Type string
	Name *string
}

// Components lists e's parts in Apache's order (the order a HashMap of
// client-id, user and ip iterates in, which its messages show).
func (e Entity) Components() []Component {
	var out []Component
	add := func(t string, n Name) {
		if !n.Present {
			return
		}
		c := Component{Type: t}
		if !n.Default {
			v := n.Value
			c.Name = &v
		}
		out = append(out, c)
	}
	add(TypeClientID, e.ClientID)
	add(TypeUser, e.User)
	add(TypeIP, e.IP)
	return out
}

// String is Apache's ClientQuotaEntity.toString, which its error
// messages quote: ClientQuotaEntity(entries={client-id=c, user=null}).
func (e Entity) String() string {
	var parts []string
	for _, c := range e.Components() {
		v := "null"
		if c.Name != nil {
			v = *c.Name
		}
		parts = append(parts, c.Type+"="+v)
	}
	return "ClientQuotaEntity(entries={" + strings.Join(parts, ", ") + "})"
}

// Key is e's canonical, path-safe form for storage: its components in
// Components order joined by "&", each "type=escaped name" or the bare
// type for the default.
func (e Entity) Key() string {
	var parts []string
	for _, c := range e.Components() {
		if c.Name == nil {
			parts = append(parts, c.Type)
		} else {
			parts = append(parts, c.Type+"="+url.QueryEscape(*c.Name))
		}
	}
	return strings.Join(parts, "&")
}

// ParseKey reverses Key.
func ParseKey(key string) (Entity, error) {
	var e Entity
	for _, part := range strings.Split(key, "&") {
		typ, esc, named := strings.Cut(part, "=")
		n := DefaultName
		if named {
			v, err := url.QueryUnescape(esc)
			if err != nil {
				return Entity{}, fmt.Errorf("quota entity %q: %w", key, err)
			}
			n = Named(v)
		}
		switch typ {
		case TypeUser:
			e.User = n
		case TypeClientID:
			e.ClientID = n
		case TypeIP:
			e.IP = n
		default:
			return Entity{}, fmt.Errorf("quota entity %q: unknown type %q", key, typ)
		}
	}
	return e, nil
}

// EntityFromWire builds the entity a request names, as Apache's
// AlterClientQuotasRequest.entries does: into a map by type, so a type
// named twice keeps its last name. Validation is Validate's.
func EntityFromWire(comps []Component) (Entity, []string) {
	var e Entity
	var unknown []string
	for _, c := range comps {
		n := DefaultName
		if c.Name != nil {
			n = Named(*c.Name)
		}
		switch c.Type {
		case TypeUser:
			e.User = n
		case TypeClientID:
			e.ClientID = n
		case TypeIP:
			e.IP = n
		default:
			unknown = append(unknown, c.Type)
		}
	}
	return e, unknown
}

// keyType is how Apache's ConfigDef types a quota key.
type keyType int

const (
	typeLong keyType = iota
	typeDouble
	typeInt
)

var userClientKeys = map[string]keyType{
	ProducerByteRate:       typeLong,
	ConsumerByteRate:       typeLong,
	RequestPercentage:      typeDouble,
	ControllerMutationRate: typeDouble,
}

var ipKeys = map[string]keyType{ConnectionCreationRate: typeInt}

// Error is a rejected alteration: Apache's INVALID_REQUEST message.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func invalid(format string, a ...any) *Error { return &Error{fmt.Sprintf(format, a...)} }

// ValidateEntity checks an entity as Apache's ClientQuotaControlManager
// (validateEntity, configKeysForEntityType); unknown lists the types
// EntityFromWire did not know.
func ValidateEntity(e Entity, unknown []string) error {
	if len(unknown) > 0 {
		return invalid("Unhandled client quota entity type: %s", unknown[0])
	}
	if !e.User.Present && !e.ClientID.Present && !e.IP.Present {
		return invalid("Invalid empty client quota entity")
	}
	for _, c := range e.Components() {
		if c.Name != nil && *c.Name == "" {
			return invalid("Empty %s not supported", c.Type)
		}
	}
	if e.IP.Present {
		if e.User.Present || e.ClientID.Present {
			// Apache's message, its missing space included.
			return invalid("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
		}
		// Apache also resolves host names (InetAddress.getByName); kaas
		// takes IP literals only: a broker handler does no DNS lookups.
		if !e.IP.Default {
			if _, err := netip.ParseAddr(e.IP.Value); err != nil {
				return invalid("%s is not a valid IP or resolvable host.", e.IP.Value)
			}
		}
	}
	return nil
}

// ValidateValue checks one quota key's new value for e
// (validateQuotaKeyValue). A NaN is refused as not greater than 0:
// Apache's comparison lets it through, and a NaN quota measures
// nothing.
func ValidateValue(e Entity, key string, value float64) error {
	keys := userClientKeys
	if e.IP.Present {
		keys = ipKeys
	}
	t, ok := keys[key]
	if !ok {
		return invalid("Invalid configuration key %s", key)
	}
	if !(value > 0) {
		return invalid("Quota %s must be greater than 0", key)
	}
	switch t {
	case typeLong:
		if value > math.MaxInt64 {
			return invalid("Proposed value for %s is too large for a LONG.", key)
		}
	case typeInt:
		if value > math.MaxInt32 {
			return invalid("Proposed value for %s is too large for an INT.", key)
		}
	case typeDouble:
		return nil
	}
	if math.Abs(math.Mod(value, 1)) > 1e-6 {
		return invalid("%s cannot be a fractional value.", key)
	}
	return nil
}
