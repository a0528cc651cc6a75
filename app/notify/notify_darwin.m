// The Objective-C half of the macOS notifier: UNUserNotificationCenter,
// the carapace.approval category and the delegate that reports answers
// to Go (notify_darwin.go). See notify_darwin.h for the contract.
//
// UNUserNotificationCenter is not an AppKit object: nothing here is
// dispatched to the main queue, and nothing waits for it (a call made on
// the main thread, where systray's run loop turns, would deadlock). The
// centre's completion handlers and delegate methods run on threads of its
// own; each hands its result to Go, which never blocks them. Every entry
// point catches Objective-C exceptions, which Go could not recover from.

#import <Foundation/Foundation.h>
#import <UserNotifications/UserNotifications.h>
#include <stdlib.h>
#include <string.h>

#include "notify_darwin.h"
#include "_cgo_export.h"

// The identifiers; notify/mac.go has the same.
static NSString *const CarapaceCategory = @"carapace.approval";
static NSString *const CarapaceReview = @"carapace.review";
static NSString *const CarapaceApprove = @"carapace.approve";
static NSString *const CarapaceDeny = @"carapace.deny";

// carapaceString converts a C string from Go (valid UTF-8, no NUL:
// notify/mac.go sees to that).
static NSString *carapaceString(const char *s) {
	NSString *out = s ? [NSString stringWithUTF8String:s] : nil;
	return out ?: @"";
}

// carapaceError copies a message for Go, which frees it.
static char *carapaceError(NSString *what) {
	return strdup(what.UTF8String ?: "unknown error");
}

static char *carapaceException(NSException *e) {
	return carapaceError([NSString stringWithFormat:@"Objective-C exception %@: %@", e.name, e.reason]);
}

static char *carapaceNSError(NSError *e) {
	return carapaceError([NSString stringWithFormat:@"%@ (%@ %ld)", e.localizedDescription, e.domain, (long)e.code]);
}

@interface CarapaceNotifyDelegate : NSObject <UNUserNotificationCenterDelegate>
@end

@implementation CarapaceNotifyDelegate

// Show approvals as banners even when Carapace is the active app.
- (void)userNotificationCenter:(UNUserNotificationCenter *)center
       willPresentNotification:(UNNotification *)notification
         withCompletionHandler:(void (^)(UNNotificationPresentationOptions))completionHandler {
	completionHandler(UNNotificationPresentationOptionBanner | UNNotificationPresentationOptionList |
	                  UNNotificationPresentationOptionSound);
}

// Report which button was pressed on which approval; Go decides what it
// means and never blocks here.
- (void)userNotificationCenter:(UNUserNotificationCenter *)center
didReceiveNotificationResponse:(UNNotificationResponse *)response
         withCompletionHandler:(void (^)(void))completionHandler {
	@try {
		UNNotificationRequest *req = response.notification.request;
		NSString *category = req.content.categoryIdentifier;
		if ([category isEqualToString:CarapaceCategory] || [category isEqualToString:CarapaceReview]) {
			carapaceNotifyResponse((char *)req.identifier.UTF8String, (char *)response.actionIdentifier.UTF8String);
		}
	} @catch (NSException *e) {
		NSLog(@"carapace: notification response: %@: %@", e.name, e.reason);
	}
	completionHandler();
}

@end

// The delegate property is weak: this keeps the delegate alive.
static CarapaceNotifyDelegate *carapaceDelegate;

int carapace_notify_bundled(void) {
	@autoreleasepool {
		return [NSBundle mainBundle].bundleIdentifier.length > 0;
	}
}

char *carapace_notify_start(void) {
	@autoreleasepool {
		@try {
			UNUserNotificationCenter *center = [UNUserNotificationCenter currentNotificationCenter];
			if (carapaceDelegate == nil) {
				carapaceDelegate = [CarapaceNotifyDelegate new];
			}
			center.delegate = carapaceDelegate;

			// Approve needs an unlocked Mac; Deny is shown as destructive.
			UNNotificationAction *approve =
			    [UNNotificationAction actionWithIdentifier:CarapaceApprove
			                                         title:@"Approve"
			                                       options:UNNotificationActionOptionAuthenticationRequired];
			UNNotificationAction *deny = [UNNotificationAction actionWithIdentifier:CarapaceDeny
			                                                                  title:@"Deny"
			                                                                options:UNNotificationActionOptionDestructive];
			UNNotificationCategory *category = [UNNotificationCategory categoryWithIdentifier:CarapaceCategory
			                                                                          actions:@[ approve, deny ]
			                                                                intentIdentifiers:@[]
			                                                                          options:UNNotificationCategoryOptionNone];
			// An approval whose notification cannot show every argument
			// offers Deny only: it is approved where it can be read whole.
			UNNotificationCategory *review = [UNNotificationCategory categoryWithIdentifier:CarapaceReview
			                                                                        actions:@[ deny ]
			                                                              intentIdentifiers:@[]
			                                                                        options:UNNotificationCategoryOptionNone];
			[center setNotificationCategories:[NSSet setWithObjects:category, review, nil]];

			// An approval shown by an earlier process is for a core that
			// may be gone; its confirmation is not this process's to answer.
			[center removeAllDeliveredNotifications];
			[center removeAllPendingNotificationRequests];

			[center requestAuthorizationWithOptions:(UNAuthorizationOptionAlert | UNAuthorizationOptionSound)
			                      completionHandler:^(BOOL granted, NSError *error) {
				                      char *msg = error ? carapaceNSError(error) : NULL;
				                      carapaceNotifyAuthorized(granted ? 1 : 0, msg);
				                      free(msg);
			                      }];
			return NULL;
		} @catch (NSException *e) {
			return carapaceException(e);
		}
	}
}

void carapace_notify_stop(void) {
	@autoreleasepool {
		@try {
			UNUserNotificationCenter *center = [UNUserNotificationCenter currentNotificationCenter];
			if (center.delegate == carapaceDelegate) {
				center.delegate = nil;
			}
		} @catch (NSException *e) {
			NSLog(@"carapace: detach the notification delegate: %@: %@", e.name, e.reason);
		}
	}
}

void carapace_notify_settings(uint64_t call) {
	@autoreleasepool {
		@try {
			[[UNUserNotificationCenter currentNotificationCenter]
			    getNotificationSettingsWithCompletionHandler:^(UNNotificationSettings *s) {
				    carapaceNotifyDone(call, (int)s.authorizationStatus, (int)s.alertSetting, (int)s.alertStyle, NULL);
			    }];
		} @catch (NSException *e) {
			char *msg = carapaceException(e);
			carapaceNotifyDone(call, 0, 0, 0, msg);
			free(msg);
		}
	}
}

void carapace_notify_show(uint64_t call, const char *key, const char *title, const char *body, int approve) {
	@autoreleasepool {
		@try {
			// Plain text only: title and body are NSStrings the centre
			// shows as they are (no markup, no links); no attachments,
			// no userInfo, no launch image: nothing is fetched or opened.
			UNMutableNotificationContent *content = [UNMutableNotificationContent new];
			content.title = carapaceString(title);
			content.body = carapaceString(body);
			content.categoryIdentifier = approve ? CarapaceCategory : CarapaceReview;
			content.threadIdentifier = CarapaceCategory;
			content.sound = [UNNotificationSound defaultSound];
			// No trigger: deliver now. The same identifier replaces.
			UNNotificationRequest *req = [UNNotificationRequest requestWithIdentifier:carapaceString(key)
			                                                                  content:content
			                                                                  trigger:nil];
			[[UNUserNotificationCenter currentNotificationCenter]
			    addNotificationRequest:req
			     withCompletionHandler:^(NSError *error) {
				     char *msg = error ? carapaceNSError(error) : NULL;
				     carapaceNotifyDone(call, 0, 0, 0, msg);
				     free(msg);
			     }];
		} @catch (NSException *e) {
			char *msg = carapaceException(e);
			carapaceNotifyDone(call, 0, 0, 0, msg);
			free(msg);
		}
	}
}

char *carapace_notify_remove(const char *key) {
	@autoreleasepool {
		@try {
			NSArray<NSString *> *ids = @[ carapaceString(key) ];
			UNUserNotificationCenter *center = [UNUserNotificationCenter currentNotificationCenter];
			[center removeDeliveredNotificationsWithIdentifiers:ids];
			[center removePendingNotificationRequestsWithIdentifiers:ids];
			return NULL;
		} @catch (NSException *e) {
			return carapaceException(e);
		}
	}
}
