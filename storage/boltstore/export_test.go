package boltstore

// CheckInvariants lets the external tests check a store's file as the internal ones do.
var CheckInvariants = checkInvariants
