package acl

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"strings"
	"unicode/utf16"
)

// Anonymous is the principal of a connection that did not authenticate
// (PLAINTEXT, or SSL without a client certificate), as Apache's
// KafkaPrincipal.ANONYMOUS.
const Anonymous = "User:ANONYMOUS"

// UserPrincipal is the principal string of a user name ("User:alice").
func UserPrincipal(name string) string { return "User:" + name }

// ParsePrincipal splits "Type:name" at its first colon, as Apache's
// SecurityUtils.parseKafkaPrincipal.
func ParsePrincipal(s string) (typ, name string, err error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok || s == "" {
		return "", "", errors.New("Could not parse principal from `" + s + "` (no colon is present separating the principal type from the principal name)")
	}
	return typ, name, nil
}

// ParseSuperUsers reads Apache's super.users: principals separated by
// semicolons, blanks trimmed.
func ParseSuperUsers(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if _, _, err := ParsePrincipal(p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// CertificatePrincipal is the principal of a client that presented cert
// on an SSL listener: "User:" and the subject's distinguished name as
// Java's X500Principal.getName() writes it (RFC 2253), which is Apache's
// default mapping (ssl.principal.mapping.rules=DEFAULT), e.g.
// "User:CN=alice,OU=eng,O=Acme,C=US".
func CertificatePrincipal(cert *x509.Certificate) string {
	return UserPrincipal(RFC2253(cert.RawSubject))
}

// rfc2253Keywords are the attribute types Java names by keyword in RFC
// 2253 form; every other type is written as its OID.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

type attributeTypeAndValue struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// rdnSET's name ends in SET so encoding/asn1 reads it as a SET OF.
type rdnSET []attributeTypeAndValue

// RFC2253 formats a DER-encoded X.500 name as Java's
// X500Principal.getName(): RDNs last to first, separated by ",", the
// attributes of one RDN by "+" in encoded order; keywords for the RFC 2253
// types, the OID otherwise; values that are not strings (and all values
// of OID-named types) as "#" and the hex of their DER encoding; the
// characters ,=+<>#;"\ escaped with a backslash, NUL as \00, and leading
// and trailing spaces escaped.
func RFC2253(rawName []byte) string {
	var seq []rdnSET
	if rest, err := asn1.Unmarshal(rawName, &seq); err != nil || len(rest) > 0 {
		return "#" + hex.EncodeToString(rawName)
	}
	var b strings.Builder
	for i := len(seq) - 1; i >= 0; i-- {
		if i != len(seq)-1 {
			b.WriteByte(',')
		}
		for j, atv := range seq[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			writeAVA(&b, atv)
		}
	}
	return b.String()
}

func writeAVA(b *strings.Builder, atv attributeTypeAndValue) {
	key, named := rfc2253Keywords[atv.Type.String()]
	if !named {
		key = atv.Type.String()
	}
	b.WriteString(key)
	b.WriteByte('=')
	s, isString := derString(atv.Value)
	if !named || !isString {
		b.WriteByte('#')
		b.WriteString(hex.EncodeToString(atv.Value.FullBytes))
		return
	}
	var v strings.Builder
	for _, r := range s {
		switch {
		case strings.ContainsRune(`,=+<>#;"\`, r):
			v.WriteByte('\\')
			v.WriteRune(r)
		case r == 0:
			v.WriteString(`\00`)
		default:
			v.WriteRune(r)
		}
	}
	out := []rune(v.String())
	lead, trail := 0, len(out)-1
	for lead < len(out) && (out[lead] == ' ' || out[lead] == '\r') {
		lead++
	}
	for trail >= 0 && (out[trail] == ' ' || out[trail] == '\r') {
		trail--
	}
	for i, r := range out {
		if i < lead || i > trail {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
}

// derString decodes the string types Java writes as text: UTF8String,
// PrintableString, T61String, IA5String and GeneralString (Latin-1) and
// BMPString (UTF-16).
func derString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal {
		return "", false
	}
	switch v.Tag {
	case asn1.TagUTF8String:
		return string(v.Bytes), true
	case asn1.TagPrintableString, asn1.TagT61String, asn1.TagIA5String, asn1.TagGeneralString:
		r := make([]rune, len(v.Bytes))
		for i, c := range v.Bytes {
			r[i] = rune(c)
		}
		return string(r), true
	case asn1.TagBMPString:
		if len(v.Bytes)%2 != 0 {
			return "", false
		}
		u := make([]uint16, len(v.Bytes)/2)
		for i := range u {
			u[i] = uint16(v.Bytes[2*i])<<8 | uint16(v.Bytes[2*i+1])
		}
		return string(utf16.Decode(u)), true
	}
	return "", false
}
