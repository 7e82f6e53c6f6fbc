'use strict'
// `agent-runtime-hooks/local`: everything the root exports (a Node process is always local here).
module.exports = require('../index.js')
