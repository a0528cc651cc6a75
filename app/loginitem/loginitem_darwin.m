// The Objective-C half of the macOS login item: SMAppService's
// mainAppService (macOS 13 and later) for the running app bundle. See
// loginitem_darwin.h for the contract. Every entry point catches
// Objective-C exceptions, which Go could not recover from.

#import <Foundation/Foundation.h>
#import <ServiceManagement/ServiceManagement.h>
#include <stdlib.h>
#include <string.h>

#include "loginitem_darwin.h"

static char *carapaceLoginError(NSString *what) {
	return strdup(what.UTF8String ?: "unknown error");
}

char *carapace_loginitem_bundle(void) {
	@autoreleasepool {
		@try {
			NSBundle *b = [NSBundle mainBundle];
			if (b.bundleIdentifier.length == 0 || ![b.bundlePath.pathExtension isEqualToString:@"app"]) {
				return NULL;
			}
			return strdup(b.bundlePath.fileSystemRepresentation);
		} @catch (NSException *e) {
			return NULL;
		}
	}
}

int carapace_loginitem_status(char **err) {
	*err = NULL;
	@autoreleasepool {
		@try {
			if (@available(macOS 13.0, *)) {
				return (int)[SMAppService mainAppService].status;
			}
			return -1;
		} @catch (NSException *e) {
			*err = carapaceLoginError([NSString stringWithFormat:@"Objective-C exception %@: %@", e.name, e.reason]);
			return -2;
		}
	}
}

char *carapace_loginitem_set(int on) {
	@autoreleasepool {
		@try {
			if (@available(macOS 13.0, *)) {
				NSError *error = nil;
				SMAppService *service = [SMAppService mainAppService];
				BOOL ok = on ? [service registerAndReturnError:&error] : [service unregisterAndReturnError:&error];
				if (ok) {
					return NULL;
				}
				return carapaceLoginError([NSString stringWithFormat:@"%@ (%@ %ld)", error.localizedDescription,
				                                                     error.domain, (long)error.code]);
			}
			return carapaceLoginError(@"SMAppService needs macOS 13 or later");
		} @catch (NSException *e) {
			return carapaceLoginError([NSString stringWithFormat:@"Objective-C exception %@: %@", e.name, e.reason]);
		}
	}
}
