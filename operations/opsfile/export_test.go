package opsfile

// MaxRecordText is the most JSON text the encoder writes for one record of an
// operation that passes operations.Operation.Validate.
const MaxRecordText = maxRecordText
