'use strict'
// `agent-runtime-hooks/local`: everything the root exports, `getBuiltinTools` among them (a Node
// process is local; sessions have the built-in tools unless `builtinTools: false`).
module.exports = require('../index.js')
