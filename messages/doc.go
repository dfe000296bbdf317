// Package messages holds the plain structs that actors exchange. They carry
// data and reply callbacks, never behaviour: a reply callback replaces a
// protoactor future on hot paths (a future costs microseconds and a dozen
// allocations per request; a callback costs nothing extra).
package messages
