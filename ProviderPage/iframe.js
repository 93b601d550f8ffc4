// The helper iframe (GET /emulator/auth/iframe) the JS SDK embeds in the app's page, as the official Auth emulator's:
// it receives the AuthEvent the provider page (a popup of the app) posts to it, or finds the one a redirect left in
// sessionStorage, and passes it to the SDK through Google's gapi.iframes channel (the SDK opened this iframe through
// gapi; the gapi loader, apis.google.com/js/api.js, is loaded right after this script).
'use strict';

(function () {
  var query = new URLSearchParams(location.search);
  var apiKey = query.get('apiKey');
  var appName = query.get('appName');
  if (!apiKey || !appName) {
    console.error('Auth Emulator Internal Error: Missing query params apiKey or appName for iframe.');
  }
  var storageKey = apiKey + ':' + appName;
  var redirectEventKey = 'firebase:redirectEvent:' + storageKey;
  var parentContainer = null;

  function storage() {
    try { return window.sessionStorage; } catch (e) { return null; }
  }

  // From the provider page (same origin: another origin's page cannot pose as it).
  window.addEventListener('message', function (e) {
    if (e.origin !== location.origin || !e.data || typeof e.data !== 'object' || e.data.eventType !== 'sendAuthEvent') return;
    var data = e.data.data || {};
    if (data.storageKey !== storageKey) {
      console.error('Auth Emulator Internal Error: Received request with mismatching storageKey');
      return;
    }
    if (parentContainer) {
      sendAuthEvent(data.authEvent);
    } else {
      // Kept until gapi is ready; initFrameMessaging() sends it.
      var s = storage();
      if (s) s[redirectEventKey] = JSON.stringify(data.authEvent);
    }
  });

  function initFrameMessaging() {
    parentContainer = gapi.iframes.getContext().getParentIframe();
    parentContainer.register('webStorageSupport', function () {
      // The SDK waits for this answer before a popup can finish; web storage itself is not needed.
      return { status: 'ACK', webStorageSupport: true };
    }, gapi.iframes.CROSS_ORIGIN_IFRAMES_FILTER);

    var authEvent = null;
    var s = storage();
    var stored = s ? s[redirectEventKey] : null;
    if (stored) {
      try { authEvent = JSON.parse(stored); } catch (e) { console.error('Auth Emulator Internal Error: Invalid stored event.'); }
    }
    sendAuthEvent(authEvent);
    if (s) delete s[redirectEventKey];
  }

  function sendAuthEvent(authEvent) {
    parentContainer.send('authEvent', {
      type: 'authEvent',
      authEvent: authEvent || { type: 'unknown', error: { code: 'auth/no-auth-event' } },
    }, function (responses) {
      if (!responses || !responses.length || responses[responses.length - 1].status !== 'ACK') {
        console.error('Auth Emulator Internal Error: Sending authEvent failed.');
      }
    }, gapi.iframes.CROSS_ORIGIN_IFRAMES_FILTER);
  }

  // Called by the gapi loader once it has loaded.
  window.gapi_onload = function () {
    gapi.load('gapi.iframes', {
      callback: initFrameMessaging,
      timeout: 10000,
      ontimeout: function () {
        console.error('Auth Emulator Internal Error: Error loading gapi.iframe! Please check your Internet connection.');
      },
    });
  };
})();
