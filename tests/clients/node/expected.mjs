// What the built-in streams answered (the oracle run checks these on every `npm test`), per client.
// Written out in full so that a change in either server or client shows up as a diff.
// node-redis parses RESP3 replies into the same shapes as RESP2 (checked: both runs compare with one object).
export const EXPECTED = {
 "node-redis RESP2": {
  "create": "OK",
  "readA": [
   {
    "name": "jobs",
    "messages": [
     {
      "id": "1-0",
      "message": {
       "n": "1",
       "kind": "odd"
      }
     },
     {
      "id": "2-0",
      "message": {
       "n": "2",
       "kind": "even"
      }
     },
     {
      "id": "3-0",
      "message": {
       "n": "3",
       "kind": "odd"
      }
     },
     {
      "id": "4-0",
      "message": {
       "n": "4",
       "kind": "even"
      }
     }
    ]
   }
  ],
  "ackA": 2,
  "readB": [
   "5-0",
   "6-0",
   "7-0",
   "8-0",
   "9-0",
   "10-0"
  ],
  "ackB": 6,
  "pending": {
   "pending": 2,
   "firstId": "3-0",
   "lastId": "4-0",
   "consumers": [
    {
     "name": "A",
     "deliveriesCounter": 2
    }
   ]
  },
  "del": 1,
  "autoclaim": {
   "nextId": "0-0",
   "messages": [
    {
     "id": "3-0",
     "message": {
      "n": "3",
      "kind": "odd"
     }
    }
   ],
   "deletedMessages": [
    "4-0"
   ]
  },
  "stream": {
   "length": 9,
   "last-generated-id": "10-0",
   "entries-added": 10,
   "max-deleted-entry-id": "4-0",
   "groups": 1,
   "first-entry": {
    "id": "1-0",
    "message": {
     "n": "1",
     "kind": "odd"
    }
   },
   "last-entry": {
    "id": "10-0",
    "message": {
     "n": "10",
     "kind": "even"
    }
   }
  },
  "groups": [
   {
    "name": "workers",
    "consumers": 2,
    "pending": 1,
    "last-delivered-id": "10-0",
    "entries-read": 10,
    "lag": 0
   }
  ],
  "consumers": [
   {
    "name": "A",
    "pending": 0
   },
   {
    "name": "B",
    "pending": 1
   }
  ],
  "ackClaimed": 1,
  "wakeId": "11-0",
  "blockedGroup": [
   {
    "name": "jobs",
    "messages": [
     {
      "id": "11-0",
      "message": {
       "n": "11",
       "kind": "odd"
      }
     }
    ]
   }
  ],
  "blockedRead": [
   {
    "name": "jobs",
    "messages": [
     {
      "id": "11-0",
      "message": {
       "n": "11",
       "kind": "odd"
      }
     }
    ]
   }
  ],
  "timeout": null,
  "type": "stream"
 },
 "ioredis RESP2": {
  "create": "OK",
  "readA": [
   [
    "jobs",
    [
     [
      "1-0",
      [
       "n",
       "1",
       "kind",
       "odd"
      ]
     ],
     [
      "2-0",
      [
       "n",
       "2",
       "kind",
       "even"
      ]
     ],
     [
      "3-0",
      [
       "n",
       "3",
       "kind",
       "odd"
      ]
     ],
     [
      "4-0",
      [
       "n",
       "4",
       "kind",
       "even"
      ]
     ]
    ]
   ]
  ],
  "ackA": 2,
  "readB": [
   "5-0",
   "6-0",
   "7-0",
   "8-0",
   "9-0",
   "10-0"
  ],
  "ackB": 6,
  "pending": [
   2,
   "3-0",
   "4-0",
   [
    [
     "A",
     "2"
    ]
   ]
  ],
  "del": 1,
  "autoclaim": [
   "0-0",
   [
    [
     "3-0",
     [
      "n",
      "3",
      "kind",
      "odd"
     ]
    ]
   ],
   [
    "4-0"
   ]
  ],
  "stream": [
   "length",
   9,
   "radix-tree-keys",
   1,
   "radix-tree-nodes",
   2,
   "last-generated-id",
   "10-0",
   "max-deleted-entry-id",
   "4-0",
   "entries-added",
   10,
   "recorded-first-entry-id",
   "1-0",
   "groups",
   1,
   "first-entry",
   [
    "1-0",
    [
     "n",
     "1",
     "kind",
     "odd"
    ]
   ],
   "last-entry",
   [
    "10-0",
    [
     "n",
     "10",
     "kind",
     "even"
    ]
   ]
  ],
  "groups": [
   [
    "name",
    "workers",
    "consumers",
    2,
    "pending",
    1,
    "last-delivered-id",
    "10-0",
    "entries-read",
    10,
    "lag",
    0
   ]
  ],
  "consumers": [
   [
    "name",
    "A",
    "pending",
    0
   ],
   [
    "name",
    "B",
    "pending",
    1
   ]
  ],
  "ackClaimed": 1,
  "wakeId": "11-0",
  "blockedGroup": [
   [
    "jobs",
    [
     [
      "11-0",
      [
       "n",
       "11",
       "kind",
       "odd"
      ]
     ]
    ]
   ]
  ],
  "blockedRead": [
   [
    "jobs",
    [
     [
      "11-0",
      [
       "n",
       "11",
       "kind",
       "odd"
      ]
     ]
    ]
   ]
  ],
  "timeout": null,
  "type": "stream"
 }
};
EXPECTED['node-redis RESP3'] = EXPECTED['node-redis RESP2'];
